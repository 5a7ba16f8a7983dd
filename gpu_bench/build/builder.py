"""Builds a solution into a loadable artifact, cached by a hash of sources, flags and compiler version.

C++ builds with g++ (``c`` and ``tvm-ffi`` bindings), CUDA with nvcc (``c`` → shared library, ``pycuda`` →
cubin). The compiler's output becomes structured diagnostics and, for CUDA, ptxas resource facts; both are
kept with the artifact so a cache hit reports them too. No torch here: ``evoteam check`` imports this.

The disk the cache may take is bounded (``cache_space``): what killed builds left, one entry, the whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from importlib import metadata
from pathlib import Path

from pydantic import BaseModel, Field

from evoteam.gpu_bench.build import cache_space
from evoteam.gpu_bench.build.cuda import nvcc
from evoteam.gpu_bench.build.cuda.instruction_classes import instruction_classes
from evoteam.gpu_bench.build.lint import lint_solution
from evoteam.gpu_bench.build.tool_version import version_line
from evoteam.gpu_bench.sandbox.run import run_confined
from evoteam.gpu_bench.schema import Binding, Diagnostic, KernelResources, Language, Solution

DEFAULT_CXX_FLAGS = ("-O3",)
BUILD_TIMEOUT_S = 300.0
_CXX_SUFFIXES = (".cpp", ".cc", ".cxx", ".c")


class BuildResult(BaseModel):
    ok: bool
    artifact: str | None = None
    """A shared library (cpp) or the folder holding the sources (python)."""
    log: str = ""
    cached: bool = False
    seconds: float = 0.0
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    resources: list[KernelResources] = Field(default_factory=list)
    """Per kernel, from ptxas (CUDA only)."""
    arch: str | None = None
    """The CUDA architecture built for (None on CPU)."""
    ptx: str | None = None
    """Path of the PTX that ptxas compiled (CUDA only; kept beside the artifact)."""
    instruction_classes: list[str] = Field(default_factory=list)
    """The instruction classes in that PTX (``wgmma``, ``mma.sync``, ``TMA``, ...: CUDA only)."""


def default_cache_root() -> Path:
    env = os.environ.get("EVOTEAM_CACHE")
    if env:
        return Path(env) / "build"
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "evoteam" / "build"


def compiler_identity(cxx: str) -> str:
    return version_line(cxx)


def cxx_compiler() -> str:
    return os.environ.get("CXX", "g++")


def build_key(solution: Solution) -> str:
    h = hashlib.sha256(solution.content_hash().encode())
    if solution.spec.language == Language.CPP:
        h.update(compiler_identity(cxx_compiler()).encode())
    if solution.spec.language == Language.CUDA:
        compiler = nvcc.find_nvcc()
        h.update((nvcc.nvcc_identity(compiler) if compiler else "no nvcc").encode())
        h.update(compiler_identity(cxx_compiler()).encode())  # nvcc's host compiler
    if solution.spec.resolved_binding() == Binding.TVM_FFI:  # its headers and library are part of the build
        try:
            h.update(metadata.version("apache-tvm-ffi").encode())
        except metadata.PackageNotFoundError:
            h.update(b"no tvm-ffi")
    return h.hexdigest()[:32]


def build(solution: Solution, cache_root: Path | None = None) -> BuildResult:
    """Builds (or finds in the cache) ``solution``; a failure is a result with the compiler's log."""
    start = time.perf_counter()
    root = cache_root or default_cache_root()
    final = root / build_key(solution)
    marker = final / cache_space.MARKER
    tampered: list[str] = []
    if marker.is_file():
        tampered = _tampered(final, solution)
        if not tampered:
            cache_space.touch(final)
            return _cached(final, marker, time.perf_counter() - start)
        shutil.rmtree(final, ignore_errors=True)  # rebuilt below, and the result says why
    root.mkdir(parents=True, exist_ok=True)
    cache_space.sweep(root)
    work = Path(tempfile.mkdtemp(prefix=cache_space.WORK_PREFIX, dir=root))
    held = cache_space.hold(work)
    added = False
    try:
        for source in solution.sources:
            dest = work / source.path
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(source.content)
        result = _compile(solution, work, final)
        result.diagnostics = [*result.diagnostics, *lint_solution(solution)]  # kept with the entry
        strange = _not_plain(work)
        if result.ok and strange:  # the builder's writes below would follow a link out of the entry
            note = f"[evoteam: the build left what is no plain file or folder ({', '.join(strange[:5])}); refused]"
            result = result.model_copy(update={"ok": False, "artifact": None, "log": f"{result.log}\n{note}"})
        size = cache_space.allocated(work) if result.ok else 0
        if size > cache_space.ENTRY_LIMIT_BYTES:
            note = (
                f"[evoteam: the build left {cache_space.shown(size)}; a build cache entry may hold "
                f"{cache_space.shown(cache_space.ENTRY_LIMIT_BYTES)} at most; refused]"
            )
            result = result.model_copy(update={"ok": False, "artifact": None, "log": f"{result.log}\n{note}"})
        if result.ok:
            if final.exists() and not marker.is_file():  # left half-written by a killed build
                shutil.rmtree(final, ignore_errors=True)
            try:
                work.rename(final)
            except OSError:  # another worker finished the same build first: use theirs
                shutil.rmtree(work, ignore_errors=True)
                if not marker.is_file():
                    raise
            else:
                (final / _RESULT).write_text(result.model_dump_json())
                (final / _MANIFEST).write_text(json.dumps(_digests(final)))
                marker.write_text(result.artifact or "")
                added = True
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
        os.close(held)
    if added:
        result.log = _joined(result.log, _evicted(root))
    result.seconds = time.perf_counter() - start
    if tampered:
        what = ", ".join(tampered[:5])
        note = f"[evoteam: the build cache entry {final.name} did not match its manifest ({what}); rebuilt]"
        result.log = f"{note}\n{result.log}" if result.log else note
    return result


def _evicted(root: Path) -> str:
    """Keeps the cache ``root`` under its limit; what was done, for the build's log (empty: nothing)."""
    note = ""
    try:
        limit = cache_space.cache_limit()
    except ValueError as exc:
        limit = cache_space.CACHE_LIMIT_BYTES
        note = f"[evoteam: {exc}; the default, {cache_space.shown(limit)}, holds]"
    removed = cache_space.evict(root, limit)
    if removed:
        gone = (
            f"[evoteam: the build cache held more than {cache_space.shown(limit)}: removed the {len(removed)} entr"
            f"{'y' if len(removed) == 1 else 'ies'} used least recently (each is built again when next asked for)]"
        )
        note = _joined(note, gone)
    return note


def _joined(text: str, note: str) -> str:
    return f"{text}\n{note}" if text and note else text or note


_RESULT = "result.json"
_MANIFEST = "manifest.json"
"""SHA-256 of every file of a cache entry when it was made: an entry is checked against it on every read."""


def _not_plain(folder: Path) -> list[str]:
    """What in ``folder`` is neither a plain file nor a folder: a symbolic link above all (the result and the
    manifest written into an entry would follow one into another entry), or a file with a second name (a hard
    link: writing it writes the other). Nothing a compiler makes."""
    found: list[str] = []
    for parent, folders, files in os.walk(folder):
        for name in [*folders, *files]:
            path = Path(parent) / name
            plain = path.is_dir() or (path.is_file() and path.stat().st_nlink == 1)
            if path.is_symlink() or not plain:
                found.append(path.relative_to(folder).as_posix())
    return sorted(found)


def _digests(folder: Path) -> dict[str, str]:
    """Every file of an entry but its bookkeeping. Workers write no bytecode, so a ``__pycache__`` in an entry
    was planted (Python would load it in place of the source)."""
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name not in (_MANIFEST, cache_space.MARKER)
    }


def keep_in_entry(path: Path, text: str) -> None:
    """Writes a file derived from a cache entry's artifact (the SASS) into the entry and records it in the
    entry's manifest, so later reads hold it to what was written. Best effort on a read-only cache."""
    entry = path.parent
    manifest = entry / _MANIFEST
    try:
        recorded = json.loads(manifest.read_text())
        tmp = path.with_name(f"{path.name}.{os.getpid()}")
        tmp.write_text(text)
        tmp.replace(path)
        recorded[path.relative_to(entry).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
        listed = manifest.with_name(f"{_MANIFEST}.{os.getpid()}")
        listed.write_text(json.dumps(recorded))
        listed.replace(manifest)
    except (OSError, ValueError):
        return


def _tampered(final: Path, solution: Solution) -> list[str]:
    """What about a cache entry differs from when it was made, or from the solution it is the build of: files
    changed, added or removed since its manifest, sources that are not the solution's. Empty: it is sound."""
    try:
        recorded = json.loads((final / _MANIFEST).read_text())
    except (OSError, ValueError):
        return ["no manifest"]
    found = _digests(final)
    problems = sorted(name for name in recorded.keys() | found.keys() if recorded.get(name) != found.get(name))
    for source in solution.sources:
        path = final / source.path
        if not path.is_file() or path.read_text(errors="replace") != source.content:
            problems.append(f"source {source.path}")
    return problems


def _cached(final: Path, marker: Path, seconds: float) -> BuildResult:
    try:
        result = BuildResult.model_validate_json((final / _RESULT).read_text())
    except (OSError, ValueError):  # a cache entry from before results were kept
        result = BuildResult(ok=True, artifact=marker.read_text())
    if result.ptx and not result.instruction_classes and Path(result.ptx).is_file():  # kept before classes were
        result.instruction_classes = instruction_classes(Path(result.ptx).read_text(errors="replace"))
    return result.model_copy(update={"cached": True, "seconds": seconds})


def _compile(solution: Solution, work: Path, final: Path) -> BuildResult:
    spec = solution.spec
    binding = spec.resolved_binding()
    if spec.language in (Language.PYTHON, Language.TRITON) and binding == Binding.PYTHON:
        return BuildResult(ok=True, artifact=str(final))
    if spec.language == Language.CPP and binding in (Binding.C, Binding.TVM_FFI):
        return _with_diagnostics(
            _compile_cxx(solution, work, final, tvm_ffi=binding == Binding.TVM_FFI), solution, work
        )
    if spec.language == Language.CUDA and binding in (Binding.C, Binding.PYCUDA):
        return _compile_cuda(solution, work, final, binding)
    return BuildResult(
        ok=False,
        log=f"evoteam cannot build language {spec.language.value!r} with binding {binding.value!r} "
        "(it builds cpp with c or tvm-ffi, cuda with c or pycuda, python/triton with python)",
    )


def _compile_cuda(solution: Solution, work: Path, final: Path, binding: Binding) -> BuildResult:
    from evoteam.gpu_bench.build.cuda.diagnostics import map_ptx_lines, parse_diagnostics
    from evoteam.gpu_bench.build.cuda.resources import parse_resources

    arch = nvcc.resolve_arch(solution.spec.target_hardware) or nvcc.DEFAULT_ARCH
    output: nvcc.Output = "cubin" if binding == Binding.PYCUDA else "shared"
    sources = [s.path for s in solution.sources]
    run = nvcc.compile_cuda(work, sources, arch, solution.spec.compile_flags, output, BUILD_TIMEOUT_S)
    log = f"$ {' '.join(run.command)}\n{run.log}" if run.command else run.log
    texts = {source.path: source.content for source in solution.sources}
    diagnostics = map_ptx_lines(parse_diagnostics(run.log, str(work), sources=texts), run.ptx, str(work))
    ptx_path = None
    if run.ptx:
        (work / "kernel.ptx").write_text(run.ptx)
        ptx_path = str(final / "kernel.ptx")
    artifact = str(final / Path(run.artifact).name) if run.artifact else None
    return BuildResult(
        ok=run.artifact is not None,
        artifact=artifact,
        log=log,
        diagnostics=diagnostics,
        resources=parse_resources(run.log, arch),
        arch=arch,
        ptx=ptx_path,
        instruction_classes=instruction_classes(run.ptx) if run.ptx else [],
    )


def _with_diagnostics(result: BuildResult, solution: Solution, work: Path) -> BuildResult:
    from evoteam.gpu_bench.build.cuda.diagnostics import parse_diagnostics

    texts = {source.path: source.content for source in solution.sources}
    result.diagnostics = parse_diagnostics(result.log, str(work), host_tool="gcc", sources=texts)
    return result


def _compile_cxx(solution: Solution, work: Path, final: Path, tvm_ffi: bool) -> BuildResult:
    sources = [s.path for s in solution.sources if s.path.endswith(_CXX_SUFFIXES)]
    if not sources:
        return BuildResult(ok=False, log=f"no C/C++ source among {[s.path for s in solution.sources]}")
    flags = list(solution.spec.compile_flags if solution.spec.compile_flags is not None else DEFAULT_CXX_FLAGS)
    link: list[str] = []
    if tvm_ffi:
        from evoteam.gpu_bench.bindings.tvm_ffi import tvm_ffi_build_flags, tvm_ffi_link_flags

        try:
            flags += tvm_ffi_build_flags()
            link = tvm_ffi_link_flags()
        except ImportError as exc:
            return BuildResult(ok=False, log=f"the tvm-ffi binding needs apache-tvm-ffi installed: {exc}")
    library = "kernel.so"
    cmd = [cxx_compiler(), "-shared", "-fPIC", *flags, "-o", library, *sources, *link]
    try:
        proc = run_confined(cmd, work, BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return BuildResult(ok=False, log=f"compiler ran past {BUILD_TIMEOUT_S:.0f} s: {' '.join(cmd)}")
    except OSError as exc:
        return BuildResult(ok=False, log=f"cannot run the compiler {cmd[0]!r}: {exc}")
    log = f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
    if proc.returncode != 0:
        return BuildResult(ok=False, log=log)
    return BuildResult(ok=True, artifact=str(final / library), log=log)
