"""Runs nvcc: finds it, builds CUDA sources into a shared library (``c`` binding) or a cubin (``pycuda``),
and keeps the PTX that ptxas saw, so diagnostics map back to source lines and constraints can read it.

Imports nothing heavy (no torch): ``evoteam check`` runs this on every save in the editor.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from evoteam.gpu_bench.build.tool_version import version_line
from evoteam.gpu_bench.sandbox.run import run_confined

DEFAULT_ARCH = "sm_90a"
DEFAULT_NVCC_FLAGS = ("-O3",)
ALWAYS = ("-lineinfo", "-Xptxas", "-v")
"""Line info for ``.loc`` mapping and ptxas's resource report; neither changes the generated code."""
_ARCH = re.compile(r"^sm_\d+[a-z]?$")
_CUDA_SUFFIXES = (".cu",)

Output = Literal["shared", "cubin"]


class NvccRun(BaseModel):
    command: list[str]
    returncode: int
    log: str
    artifact: str | None = None
    ptx: str = ""
    """The PTX of the target arch (empty if nvcc stopped before generating it)."""


def find_nvcc() -> str | None:
    """``$NVCC``, then ``$CUDA_HOME/bin/nvcc``, then ``nvcc`` on PATH, then /usr/local/cuda/bin/nvcc."""
    explicit = os.environ.get("NVCC")
    if explicit:
        return explicit
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.is_file() else None


def nvcc_identity(nvcc: str) -> str:
    """nvcc's release line (part of the build key: a new compiler makes new code)."""
    return version_line(nvcc, last=True)


def resolve_arch(target_hardware: list[str]) -> str | None:
    """The first ``sm_XX[a]`` among the targets, ``sm_90a`` for generic GPU names, None for ``cpu`` only."""
    for target in target_hardware:
        if _ARCH.match(target):
            return target
    if all(t.lower() == "cpu" for t in target_hardware):
        return None
    return DEFAULT_ARCH


def is_arch(text: str) -> bool:
    return bool(_ARCH.match(text))


def compile_cuda(
    work: Path,
    sources: list[str],
    arch: str,
    flags: list[str] | None,
    output: Output,
    timeout_s: float,
    nvcc: str | None = None,
) -> NvccRun:
    """Compiles ``sources`` (paths relative to ``work``) in ``work``; the artifact lands there too."""
    compiler = nvcc or find_nvcc()
    cu = [s for s in sources if s.endswith(_CUDA_SUFFIXES)]
    if compiler is None:
        return NvccRun(command=[], returncode=127, log="nvcc not found: set $NVCC or $CUDA_HOME, or put nvcc on PATH")
    if not cu:
        return NvccRun(command=[], returncode=2, log=f"no .cu source among {sources}")
    if output == "cubin" and len(cu) > 1:
        return NvccRun(
            command=[], returncode=2, log=f"the pycuda binding loads one cubin: give one .cu source, not {cu}"
        )
    keep = work / "nvcc-keep"
    keep.mkdir(exist_ok=True)
    artifact = "kernel.so" if output == "shared" else "kernel.cubin"
    chosen = list(flags if flags is not None else DEFAULT_NVCC_FLAGS)
    mode = ["-shared", "-Xcompiler", "-fPIC"] if output == "shared" else ["-cubin"]
    virtual = "compute_" + arch.removeprefix("sm_")
    # Explicit -gencode: `-arch=sm_90a` with -shared also builds generic compute_90 PTX, which rejects
    # arch-specific instructions (wgmma). The library embeds SASS plus PTX for the JIT; a cubin holds SASS only.
    codes = f"[{arch},{virtual}]" if output == "shared" else arch
    target = ["-gencode", f"arch={virtual},code={codes}"]
    cmd = [compiler, *mode, *target, *ALWAYS, *chosen, "--keep", "--keep-dir", keep.name, "-o", artifact, *cu]
    try:
        proc = run_confined(cmd, work, timeout_s)
    except subprocess.TimeoutExpired:
        return NvccRun(command=cmd, returncode=124, log=f"nvcc ran past {timeout_s:.0f} s", ptx=_kept_ptx(keep, arch))
    except OSError as exc:
        return NvccRun(command=cmd, returncode=127, log=f"cannot run nvcc {compiler!r}: {exc}")
    log = proc.stdout + proc.stderr
    ptx = _kept_ptx(keep, arch)
    shutil.rmtree(keep, ignore_errors=True)
    ok = proc.returncode == 0 and (work / artifact).is_file()
    return NvccRun(
        command=cmd, returncode=proc.returncode, log=log, artifact=str(work / artifact) if ok else None, ptx=ptx
    )


def _kept_ptx(keep: Path, arch: str) -> str:
    """The PTX files nvcc kept for ``arch``'s virtual architecture (``compute_90a`` for ``sm_90a``)."""
    virtual = "compute_" + arch.removeprefix("sm_")
    files = sorted(keep.glob(f"*.{virtual}.ptx")) or sorted(keep.glob("*.ptx"))
    return "\n".join(p.read_text(errors="replace") for p in files)


def find_cuobjdump() -> str | None:
    """cuobjdump from the CUDA toolkit, or from the ``nvidia-cuda-cuobjdump`` wheel."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    nvcc = find_nvcc()
    if nvcc is not None and (Path(nvcc).parent / "cuobjdump").is_file():
        return str(Path(nvcc).parent / "cuobjdump")
    spec = importlib.util.find_spec("nvidia")  # the namespace package of NVIDIA's wheels
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        for candidate in sorted(Path(root).glob("*/bin/cuobjdump")):
            if os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def disassemble(artifact: Path, timeout_s: float = 60.0) -> tuple[str | None, str]:
    """(SASS text, "") or (None, why not)."""
    tool = find_cuobjdump()
    if tool is None:
        return None, "cuobjdump not found (install the CUDA toolkit or `pip install nvidia-cuda-cuobjdump`)"
    # cuobjdump runs nvdisasm, which NVIDIA's wheels and toolkits put beside it
    env = {**os.environ, "PATH": f"{Path(tool).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    try:
        proc = subprocess.run(
            [tool, "-sass", str(artifact)], capture_output=True, text=True, timeout=timeout_s, check=False, env=env
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"cuobjdump failed: {exc}"
    if proc.returncode != 0:
        return None, f"cuobjdump failed: {proc.stderr.strip()[-500:]}"
    return proc.stdout, ""
