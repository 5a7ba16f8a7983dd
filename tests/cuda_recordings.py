"""The real compiler output that the parser tests read: how it was recorded, and how to run it again now.

Re-record by hand with ``python tests/cuda_recordings.py`` (needs nvcc and g++).

Each case copies ``broken/`` and ``good/`` into the scratch build folder ``BUILD`` (a fixed path, so the
recordings do not depend on where the repository lives), runs one command there and writes everything it
printed to ``recorded/<name>.txt``, whose first line is ``# <the command>``. PTX files are copied next to
them, with the command in a ``.cmd`` sidecar (a first comment line would shift the PTX line numbers).
The live tests read the same first lines and run the commands again in a temporary folder.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent / "cuda"
RECORDED = HERE / "recorded"
BUILD = "/tmp/evoteam-cuda"
"""The scratch build folder named in the recorded commands; tests pass it as ``build_dir``."""

NVCC = ["nvcc", "-arch=sm_90a", "-lineinfo", "-Xptxas", "-v", "-c"]

CASES: dict[str, list[str]] = {
    "undefined_identifier": [*NVCC, "{b}/broken/undefined_identifier.cu", "-o", "{b}/out.o"],
    "type_mismatch": [*NVCC, "{b}/broken/type_mismatch.cu", "-o", "{b}/out.o"],
    "unused_variable": [*NVCC, "{b}/broken/unused_variable.cu", "-o", "{b}/out.o"],
    "template_instantiation": [*NVCC, "{b}/broken/template_instantiation.cu", "-o", "{b}/out.o"],
    "template_in_header": [*NVCC, "{b}/broken/template_in_header.cu", "-o", "{b}/out.o"],
    "overload_notes": [*NVCC, "{b}/broken/overload_notes.cu", "-o", "{b}/out.o"],
    "recursion": [*NVCC, "{b}/broken/recursion.cu", "-o", "{b}/out.o"],
    "host_error": [*NVCC, "{b}/broken/host_error.cu", "-o", "{b}/out.o"],
    "host_asm": [*NVCC, "{b}/broken/host_asm.cu", "-o", "{b}/out.o"],
    "missing_include": [*NVCC, "{b}/broken/missing_include.cu", "-o", "{b}/out.o"],
    "bad_inline_ptx": [*NVCC, "{b}/broken/bad_inline_ptx.cu", "-o", "{b}/out.o"],
    "inlined_bad_ptx": [*NVCC, "{b}/broken/inlined_bad_ptx.cu", "-o", "{b}/out.o"],
    "invalid_instruction": [*NVCC, "{b}/broken/invalid_instruction.cu", "-o", "{b}/out.o"],
    "too_much_shared": [*NVCC, "{b}/broken/too_much_shared.cu", "-o", "{b}/out.o"],
    "link_error": ["nvcc", "-arch=sm_90a", "-rdc=true", "{b}/broken/link_error.cu", "-o", "{b}/out"],
    "host_template": ["g++", "-std=c++17", "-Wall", "-c", "{b}/broken/host_template.cpp", "-o", "{b}/out.o"],
    "spill": [*NVCC, "{b}/good/spill.cu", "-o", "{b}/out.o"],
    "spill_maxrregcount": [*NVCC, "-maxrregcount=16", "{b}/good/spill.cu", "-o", "{b}/out.o"],
    "shared_sync": [*NVCC, "{b}/good/shared_sync.cu", "-o", "{b}/out.o"],
    "shared_sync_rdc": [*NVCC, "-rdc=true", "{b}/good/shared_sync.cu", "-o", "{b}/out.o"],
    "shared_sync_gencode": [
        "nvcc",
        "-gencode",
        "arch=compute_80,code=sm_80",
        "-gencode",
        "arch=compute_90a,code=sm_90a",
        "-lineinfo",
        "-Xptxas",
        "-v",
        "-c",
        "{b}/good/shared_sync.cu",
        "-o",
        "{b}/out.o",
    ],
    "template_kernel": [*NVCC, "{b}/good/template_kernel.cu", "-o", "{b}/out.o"],
}

PTX_CASES: dict[str, list[str]] = {
    name: ["nvcc", "-arch=sm_90a", "-lineinfo", "-ptx", f"{{b}}/broken/{name}.cu", "-o", f"{{b}}/{name}.ptx"]
    for name in ("bad_inline_ptx", "inlined_bad_ptx", "invalid_instruction", "too_much_shared")
}


def prepare(build: Path) -> None:
    """A fresh copy of the sources in ``build``."""
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    for part in ("broken", "good"):
        shutil.copytree(HERE / part, build / part)


def expand(argv: list[str], build: str) -> list[str]:
    return [arg.replace("{b}", build) for arg in argv]


def run(argv: list[str], build: Path) -> str:
    """Everything the command printed, stdout then stderr (nvcc writes diagnostics to both)."""
    done = subprocess.run(argv, cwd=build, capture_output=True, text=True, check=False, timeout=300)
    return done.stdout + done.stderr


def command(path: Path) -> list[str]:
    """The command a recording was made with: its first line (``.txt``) or its sidecar (``.ptx.cmd``)."""
    if path.suffix == ".ptx":
        return shlex.split((path.parent / f"{path.name}.cmd").read_text())
    return shlex.split(path.read_text().split("\n", 1)[0].removeprefix("# "))


class Recorded:
    """The output as recorded in ``recorded/``."""

    kind = "recorded"
    build = BUILD

    def missing(self, name: str) -> str | None:
        return None

    def output(self, name: str) -> str:
        return (RECORDED / f"{name}.txt").read_text().split("\n", 1)[1]

    def ptx(self, name: str) -> str:
        return (RECORDED / f"{name}.ptx").read_text()


class Live:
    """The recorded commands run again now in ``build`` (a fresh copy of the sources); the caller skips when
    a tool is missing (``missing``)."""

    kind = "live"

    def __init__(self, build: Path) -> None:
        prepare(build)
        self.build = str(build)
        self._outputs: dict[str, str] = {}

    def missing(self, name: str) -> str | None:
        """The tool the case needs that is not installed, else None."""
        tool = command(RECORDED / f"{name}.txt")[0]
        return None if shutil.which(tool) else tool

    def _argv(self, recording: Path) -> list[str]:
        return [arg.replace(BUILD, self.build) for arg in command(recording)]

    def output(self, name: str) -> str:
        if name not in self._outputs:
            self._outputs[name] = run(self._argv(RECORDED / f"{name}.txt"), Path(self.build))
        return self._outputs[name]

    def ptx(self, name: str) -> str:
        argv = self._argv(RECORDED / f"{name}.ptx")
        run(argv, Path(self.build))
        return Path(argv[argv.index("-o") + 1]).read_text()


def main() -> int:
    build = Path(BUILD)
    prepare(build)
    RECORDED.mkdir(exist_ok=True)
    for name, template in CASES.items():
        argv = expand(template, BUILD)
        text = run(argv, build)
        (RECORDED / f"{name}.txt").write_text(f"# {shlex.join(argv)}\n{text}")
    for name, template in PTX_CASES.items():
        argv = expand(template, BUILD)
        run(argv, build)
        shutil.copyfile(build / f"{name}.ptx", RECORDED / f"{name}.ptx")
        (RECORDED / f"{name}.ptx.cmd").write_text(shlex.join(argv) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
