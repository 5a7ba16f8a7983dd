"""How the editor compiles a kernel file that is no task: any ``.cu``, ``.cuh`` or C++ file of the workspace, on
its own, for its diagnostics and its kernels' ptxas resources.

- The language comes from the suffix; a header (``.cuh``, ``.hpp``...) is compiled through a one-line source
  that includes it.
- CUDA targets the ``evoteam.cudaArch`` setting, else the local GPU's architecture (``nvidia-smi``), else
  ``sm_90a``.
- Include paths and defines come from ``evoteam.includePaths`` and from the file's entry in a
  ``compile_commands.json`` (at the workspace root or in ``build/``; a file without an entry borrows those of
  an entry in its folder). The file's own folder is always on the include path.
- The editor's text is compiled, not the file on disk; the build goes to a throwaway cache, so typing never
  fills the evaluator's build cache.

Nothing here runs at import; ``local_arch`` and ``check_text`` run tools and belong on the server's executor.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from evoteam.gpu_bench.api import (
    DEFAULT_ARCH,
    Binding,
    BuildSpec,
    CheckResult,
    Language,
    Solution,
    SourceFile,
    check_solution,
    is_arch,
)

KERNEL_FILES: dict[str, tuple[Language, bool]] = {
    ".cu": (Language.CUDA, False),
    ".cuh": (Language.CUDA, True),
    ".cpp": (Language.CPP, False),
    ".cc": (Language.CPP, False),
    ".cxx": (Language.CPP, False),
    ".hpp": (Language.CPP, True),
    ".hh": (Language.CPP, True),
    ".hxx": (Language.CPP, True),
}
"""Suffix → (language, is a header). Plain ``.h`` files are left out: they may be C, C++ or CUDA."""
DATABASES = ("compile_commands.json", "build/compile_commands.json")
"""Where a compilation database is looked for, relative to the workspace root, first found wins."""
KEPT_FLAGS = ("-I", "-isystem", "-iquote", "-D", "-U", "-include", "-std=", "--std=")
"""The flags of a database entry that matter to diagnostics (the rest: outputs, optimization, warnings)."""
_TAKES_VALUE = {"-I", "-isystem", "-iquote", "-D", "-U", "-include"}
_PATH_FLAGS = {"-I", "-isystem", "-iquote", "-include"}
_CAPABILITY = re.compile(r"^\s*(\d+)\.(\d+)\s*$")


def is_kernel_file(path: Path) -> bool:
    return path.suffix in KERNEL_FILES


def arch_of(capability: str) -> str | None:
    """``sm_90a`` for compute capability ``9.0`` (9.0 and later get their arch-specific ``a`` target, which
    wgmma and tcgen05 need), ``sm_86`` for ``8.6``; None for text that is not a capability."""
    match = _CAPABILITY.match(capability)
    if match is None:
        return None
    major, minor = int(match[1]), int(match[2])
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


Query = Callable[[list[str]], str]


def _run(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=20, check=False)
    return done.stdout if done.returncode == 0 else ""


def local_arch(query: Query = _run) -> str | None:
    """The first local GPU's architecture from ``nvidia-smi``, or None when there is no GPU (or no driver)."""
    try:
        out = query(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"])
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        arch = arch_of(line)
        if arch is not None:
            return arch
    return None


@dataclass
class CompileDatabase:
    """The entries of a ``compile_commands.json``: resolved file → the flags kept (paths made absolute)."""

    path: Path | None = None
    flags: dict[Path, list[str]] = field(default_factory=dict)
    problem: str | None = None
    """Why the database could not be read (the editor logs it once; diagnostics go on without it)."""

    def flags_for(self, file: Path) -> list[str]:
        resolved = file.resolve()
        found = self.flags.get(resolved)
        if found is not None:
            return found
        for other, flags in self.flags.items():  # a header, or a new file: the flags of its folder
            if other.parent == resolved.parent:
                return flags
        return []


def find_database(root: Path) -> Path | None:
    for relative in DATABASES:
        path = root / relative
        if path.is_file():
            return path
    return None


def load_database(root: Path) -> CompileDatabase:
    path = find_database(root)
    return read_database(path) if path is not None else CompileDatabase()


def read_database(path: Path) -> CompileDatabase:
    try:
        entries = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return CompileDatabase(path, problem=f"cannot read {path}: {exc}")
    if not isinstance(entries, list):
        return CompileDatabase(path, problem=f"{path} is not a JSON list of compile commands")
    database = CompileDatabase(path)
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            continue
        directory = Path(str(entry.get("directory") or path.parent))
        arguments = entry.get("arguments")
        if not (isinstance(arguments, list) and all(isinstance(a, str) for a in arguments)):
            command = entry.get("command")
            try:
                arguments = shlex.split(command) if isinstance(command, str) else []
            except ValueError:
                continue
        file = (directory / entry["file"]).resolve()
        database.flags.setdefault(file, kept_flags(arguments[1:], directory))
    return database


def kept_flags(arguments: list[str], directory: Path) -> list[str]:
    """The include, define and language-standard flags of a compile command, paths made absolute."""
    kept: list[str] = []
    pending: str | None = None
    for argument in arguments:
        if pending is not None:
            kept += _flag(pending, argument, directory)
            pending = None
            continue
        if argument in _TAKES_VALUE:
            pending = argument
            continue
        for prefix in sorted(_TAKES_VALUE, key=len, reverse=True):
            if argument.startswith(prefix) and len(argument) > len(prefix):
                kept += _flag(prefix, argument[len(prefix) :], directory)
                break
        else:
            if argument.startswith(("-std=", "--std=")):
                kept.append(argument.replace("--std=", "-std=", 1))
    return kept


def _flag(name: str, value: str, directory: Path) -> list[str]:
    if name in _PATH_FLAGS:
        value = str((directory / value).resolve())
    if name == "-iquote":  # nvcc has no -iquote; a plain include path finds the same headers
        name = "-I"
    return [name, value]


@dataclass(frozen=True)
class FileCheck:
    """What to compile: the file, its language, the target and the flags."""

    path: Path
    language: Language
    header: bool
    arch: str
    flags: tuple[str, ...]


def plan(path: Path, text: str, arch: str | None, includes: list[Path], database: CompileDatabase) -> FileCheck:
    """How ``path`` (its editor text ``text``) is compiled; ``arch`` from the settings or the local GPU."""
    language, header = KERNEL_FILES[path.suffix]
    flags = ["-O3", f"-I{path.parent}"]
    flags += [f"-I{p}" for p in includes]
    flags += database.flags_for(path)
    if language == Language.CPP and re.search(r"#\s*pragma\s+omp\b|<omp\.h>", text):
        flags.append("-fopenmp")
    target = arch if arch is not None and is_arch(arch) else DEFAULT_ARCH
    return FileCheck(path, language, header, target if language == Language.CUDA else "cpu", tuple(flags))


def file_solution(check: FileCheck, text: str) -> Solution:
    """The file as a solution of its own; a header gets a source that includes it."""
    sources = [SourceFile(path=check.path.name, content=text)]
    if check.header:
        suffix = ".cu" if check.language == Language.CUDA else ".cpp"
        sources.append(SourceFile(path=f"evoteam_check{suffix}", content=f'#include "{check.path.name}"\n'))
    spec = BuildSpec(
        language=check.language,
        target_hardware=[check.arch],
        entry_point=f"{check.path.name}::check",
        binding=Binding.C,
        compile_flags=list(check.flags),
    )
    return Solution(name=check.path.stem, definition="check", author="user", spec=spec, sources=sources)


def check_text(check: FileCheck, text: str) -> CheckResult:
    """Compiles ``text`` as ``check`` says, in a build cache of its own that is removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="evoteam-editor-check-") as cache:
        return check_solution(file_solution(check, text), None, Path(cache))
