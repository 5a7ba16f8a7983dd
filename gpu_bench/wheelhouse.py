"""The offline wheel folder for the GPU machine: which packages the device check installs there (evoteam's own
requirements, its `gpu` and `device-check` extras and the build tools, less what the device image already holds),
fetched here for that machine's Python and platform, and a check that a folder is complete for it.

The GPU machine reaches no package index, so `gpu_bench/device_check.sh` installs from this folder with
`pip --no-index --find-links`. Source-only packages (pycuda) come as their source archive, and their own
requirements as wheels; the check builds them there and keeps the wheel it built for the next run.

    python3 gpu_bench/wheelhouse.py build [DIR]    # fetch (pip download) into DIR (default .device-wheels)
    python3 gpu_bench/wheelhouse.py check DIR      # exit 1 when DIR lacks something the device needs

Only the standard library and `packaging` are imported, so the file also runs by its path on a machine where
evoteam is not installed yet (the device check runs it before it installs anything).
"""

from __future__ import annotations

import argparse
import email.parser
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

DEFAULT_FOLDER = ".device-wheels"
EXTRAS = ("gpu", "device-check")
# What the device check needs before it can install evoteam without build isolation.
BUILD_TOOLS = ("setuptools>=68", "wheel")
# Packages whose source archive is fetched, without its requirements (they are fetched as wheels on their own):
# pycuda publishes no wheels, and its build needs the machine's CUDA driver library.
SOURCE_ONLY = frozenset({"pycuda"})
# What the device image already holds, as the GPU machine's documentation lists it: never fetched (torch and the
# CUDA libraries are gigabytes, and the machine's builds must stay), and accepted as present by the check. Small
# packages the image also holds (typing-extensions, attrs, pytest...) are still fetched when something needs
# them, so that a version the image lacks is at hand.
IMAGE_HOLDS = frozenset(
    canonicalize_name(name)
    for name in (
        "torch", "triton", "numpy", "rich", "safetensors", "matplotlib", "ninja", "contourpy", "cycler",
        "fonttools", "kiwisolver", "pillow", "pyparsing", "python-dateutil", "six", "markdown-it-py", "mdurl",
        "jinja2", "filelock", "fsspec", "networkx", "sympy", "mpmath", "nvidia-ml-py", "cuda-bindings",
        "cuda-pathfinder", "cuda-toolkit", "tqdm", "hypothesis", "sortedcontainers",
    )
)  # fmt: skip


@dataclass(frozen=True)
class Target:
    """The interpreter and platform the folder is for: the GPU machine's."""

    python: str = "3.12"
    # manylinux tags up to the image's glibc (2.39), and plain linux_x86_64: a wheel built on the machine itself.
    platforms: tuple[str, ...] = (
        *(f"manylinux_2_{minor}_x86_64" for minor in range(39, 16, -1)),
        "manylinux2014_x86_64",
        "manylinux2010_x86_64",
        "manylinux1_x86_64",
        "linux_x86_64",
    )

    @property
    def full_python(self) -> str:
        return f"{self.python}.0"

    @property
    def abi(self) -> str:
        return "cp" + self.python.replace(".", "")

    def describe(self) -> str:
        return f"CPython {self.python} on Linux x86_64"

    def marker_environment(self) -> dict[str, str]:
        env: dict[str, str] = {key: str(value) for key, value in default_environment().items()}
        env.update(
            python_version=self.python,
            python_full_version=self.full_python,
            implementation_name="cpython",
            implementation_version=self.full_python,
            platform_python_implementation="CPython",
            sys_platform="linux",
            platform_system="Linux",
            platform_machine="x86_64",
            os_name="posix",
            extra="",
        )
        return env

    def accepts_tags(self, interpreter: str, abi: str, platform: str) -> bool:
        """Whether pip on the target installs a wheel of this tag (py3, py312, cp312, or cp3N-abi3 for N <= 12)."""
        if platform not in {"any", *self.platforms}:
            return False
        major, minor = (int(part) for part in self.python.split(".")[:2])
        if abi == "abi3":
            return interpreter.startswith(f"cp{major}") and interpreter[3:].isdigit() and int(interpreter[3:]) <= minor
        return abi in {"none", self.abi} and interpreter in {f"py{major}", f"py{major}{minor}", self.abi}

    def pip_download_options(self) -> list[str]:
        options = ["--only-binary=:all:", "--python-version", self.python, "--implementation", "cp", "--abi", self.abi]
        options += ["--abi", "abi3", "--abi", "none"]
        for platform in self.platforms:
            options += ["--platform", platform]
        return options


@dataclass(frozen=True)
class Distribution:
    """One file of the folder: a wheel or a source archive, with what its metadata requires."""

    path: Path
    name: str  # canonical
    version: Version
    requires: tuple[Requirement, ...]
    wheel_tags: tuple[tuple[str, str, str], ...] | None  # None for a source archive


@dataclass
class Report:
    """What the check found: the files, and what the device would miss."""

    target: Target
    distributions: list[Distribution] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # "NAME SPEC (needed by WHO)"
    problems: list[str] = field(default_factory=list)  # files that cannot be read
    ignored: list[str] = field(default_factory=list)  # wheels for another Python or platform: pip passes them by

    @property
    def complete(self) -> bool:
        return not self.missing and not self.problems

    def total_bytes(self) -> int:
        return sum(d.path.stat().st_size for d in self.distributions)

    def render(self) -> str:
        sources = sorted(d.name for d in self.distributions if d.wheel_tags is None)
        lines = [
            f"{len(self.distributions)} files, {self.total_bytes() / 2**20:.1f} MiB, for {self.target.describe()}"
            + (f"; built there from source: {', '.join(sources)}" if sources else "")
        ]
        lines += [f"missing: {line}" for line in self.missing]
        lines += [f"unusable: {line}" for line in self.problems]
        lines += [f"ignored (not for {self.target.describe()}): {line}" for line in self.ignored]
        lines.append("complete" if self.complete else "incomplete: the device check's offline install would fail")
        return "\n".join(lines)


class Downloader(Protocol):
    """Fetches distributions into a folder (pip download)."""

    def wheels(self, requirements: Sequence[str], dest: Path, target: Target) -> None: ...

    def sources(self, names: Sequence[str], dest: Path) -> None: ...


class PipDownloader:
    """`pip download` with this interpreter's pip and its index settings."""

    def __init__(self, python: str = sys.executable, env: Mapping[str, str] | None = None) -> None:
        self.python = python
        self.env = None if env is None else dict(env)

    def _run(self, args: list[str]) -> None:
        command = [self.python, "-m", "pip", "download", "--disable-pip-version-check", *args]
        proc = subprocess.run(command, text=True, capture_output=True, check=False, env=self.env)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise RuntimeError(f"pip download failed (exit {proc.returncode}):\n{tail}")

    def wheels(self, requirements: Sequence[str], dest: Path, target: Target) -> None:
        if requirements:
            self._run(["--dest", str(dest), *target.pip_download_options(), *requirements])

    def sources(self, names: Sequence[str], dest: Path) -> None:
        for name in names:  # the archive alone: its requirements are fetched as wheels (build())
            self._run(["--dest", str(dest), "--no-deps", f"--no-binary={name}", name])


def project_requirements(pyproject: Path, extras: Iterable[str] = EXTRAS) -> list[Requirement]:
    """evoteam's requirements on the device: its dependencies, the named extras and the build tools."""
    project = tomllib.loads(pyproject.read_text())["project"]
    lines: list[str] = list(project["dependencies"])
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        if extra not in optional:
            raise ValueError(f"{pyproject} has no extra named {extra!r}")
        lines += optional[extra]
    return [Requirement(line) for line in (*lines, *BUILD_TOOLS)]


def to_fetch(requirements: Iterable[Requirement]) -> tuple[list[str], list[str]]:
    """(wheel requirements, source-only names): every requirement the image does not hold."""
    wheels: list[str] = []
    sources: list[str] = []
    for req in requirements:
        name = canonicalize_name(req.name)
        if name in IMAGE_HOLDS:
            continue
        if name in SOURCE_ONLY:
            sources.append(name)
        else:
            wheels.append(str(req))
    return wheels, sources


def read_distribution(path: Path) -> Distribution:
    """A wheel's or a source archive's name, version and requirements, from its file name and metadata."""
    if path.name.endswith(".whl"):
        name, version, _build, tags = parse_wheel_filename(path.name)
        with zipfile.ZipFile(path) as archive:
            meta_name = next(
                (n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None
            )
            if meta_name is None:
                raise ValueError("no .dist-info/METADATA in the wheel")
            text = archive.read(meta_name).decode()
        wheel_tags = tuple(sorted((t.interpreter, t.abi, t.platform) for t in tags))
    elif path.name.endswith((".tar.gz", ".zip")):
        name, version = parse_sdist_filename(path.name)
        text = _sdist_pkg_info(path)
        wheel_tags = None
    else:
        raise ValueError("neither a wheel nor a source archive")
    message = email.parser.Parser().parsestr(text, headersonly=True)
    requires = tuple(Requirement(line) for line in message.get_all("Requires-Dist") or [])
    return Distribution(path, canonicalize_name(name), version, requires, wheel_tags)


def _sdist_pkg_info(path: Path) -> str:
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path) as archive:
            name = next((n for n in archive.namelist() if n.count("/") == 1 and n.endswith("/PKG-INFO")), None)
            if name is None:
                raise ValueError("no PKG-INFO at the archive's top")
            return archive.read(name).decode()
    with tarfile.open(path, "r:gz") as archive:
        for member in archive:
            if member.isfile() and member.name.count("/") == 1 and member.name.endswith("/PKG-INFO"):
                handle = archive.extractfile(member)
                if handle is not None:
                    return handle.read().decode()
    raise ValueError("no PKG-INFO at the archive's top")


def check(folder: Path, roots: Sequence[Requirement], target: Target | None = None) -> Report:
    """Whether pip, offline on the target, finds in `folder` (or on the image) everything `roots` need."""
    target = target or Target()
    report = Report(target)
    by_name: dict[str, list[Distribution]] = {}
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue
        try:
            dist = read_distribution(path)
        except (ValueError, OSError, KeyError, zipfile.BadZipFile, tarfile.TarError, InvalidRequirement) as exc:
            report.problems.append(f"{path.name}: {exc}")  # InvalidWheelFilename and the like are ValueErrors
            continue
        if dist.wheel_tags is not None and not any(target.accepts_tags(*tags) for tags in dist.wheel_tags):
            report.ignored.append(path.name)
            continue
        report.distributions.append(dist)
        by_name.setdefault(dist.name, []).append(dist)
    env = target.marker_environment()
    pending: list[tuple[Requirement, str]] = [(req, "evoteam") for req in roots]
    seen: set[tuple[str, str]] = set()
    while pending:
        req, needed_by = pending.pop(0)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = canonicalize_name(req.name)
        key = (name, str(req.specifier))
        if key in seen:
            continue
        seen.add(key)
        if name in IMAGE_HOLDS:
            continue
        matching = [d for d in by_name.get(name, []) if req.specifier.contains(d.version, prereleases=True)]
        if not matching:
            have = ", ".join(str(d.version) for d in by_name.get(name, []))
            report.missing.append(
                f"{name}{req.specifier} (needed by {needed_by})" + (f"; the folder has {have}" if have else "")
            )
            continue
        chosen = max(matching, key=lambda d: (d.wheel_tags is not None, d.version))  # as pip: a wheel, the newest
        for sub in chosen.requires:
            pending.append((sub, f"{chosen.name} {chosen.version}"))
    return report


def build(dest: Path, pyproject: Path, downloader: Downloader, target: Target | None = None) -> Report:
    """Fetch into `dest` what the device needs (files already there stay: a wheel built on the device, say),
    the requirements of source-only packages too, then check the folder."""
    target = target or Target()
    dest.mkdir(parents=True, exist_ok=True)
    roots = project_requirements(pyproject)
    wheels, sources = to_fetch(roots)
    downloader.wheels(wheels, dest, target)
    downloader.sources(sources, dest)
    env = target.marker_environment()
    source_requirements: list[Requirement] = []
    for path in sorted(dest.iterdir()):
        if path.name.endswith((".tar.gz", ".zip")):
            dist = read_distribution(path)
            if dist.name in SOURCE_ONLY:
                source_requirements += [r for r in dist.requires if r.marker is None or r.marker.evaluate(env)]
    more, _ = to_fetch(source_requirements)
    downloader.wheels(more, dest, target)
    return check(dest, roots, target)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="wheelhouse", description="The offline wheel folder for the GPU machine.")
    commands = parser.add_subparsers(dest="command", required=True)
    build_cmd = commands.add_parser("build", help="fetch the folder (needs a package index)")
    build_cmd.add_argument("folder", nargs="?", type=Path, default=Path(DEFAULT_FOLDER))
    check_cmd = commands.add_parser("check", help="is the folder complete for the device?")
    check_cmd.add_argument("folder", type=Path)
    for command in (build_cmd, check_cmd):
        command.add_argument(
            "--pyproject", type=Path, default=Path(__file__).resolve().parent.parent / "pyproject.toml"
        )
        command.add_argument("--python", default=Target.python, help="the device's Python (default %(default)s)")
    args = parser.parse_args(argv)
    target = Target(python=args.python)
    if not args.pyproject.is_file():
        print(f"wheelhouse: no pyproject.toml at {args.pyproject}", file=sys.stderr)
        return 2
    try:
        if args.command == "build":
            report = build(args.folder, args.pyproject, PipDownloader(), target)
        else:
            if not args.folder.is_dir():
                print(f"wheelhouse: {args.folder} is not a folder", file=sys.stderr)
                return 2
            report = check(args.folder, project_requirements(args.pyproject), target)
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"wheelhouse: {exc}", file=sys.stderr)
        return 2
    print(f"{args.folder}: {report.render()}")
    return 0 if report.complete else 1


if __name__ == "__main__":
    raise SystemExit(main())
