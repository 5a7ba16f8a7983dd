"""Wheels and source archives made on the spot (metadata only) for the wheel folder's tests, and a folder that
satisfies evoteam's requirements for the device check's no-GPU path."""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from packaging.utils import canonicalize_name

from evoteam.gpu_bench.wheelhouse import IMAGE_HOLDS, SOURCE_ONLY, project_requirements


def make_wheel(folder: Path, name: str, version: str, requires: Sequence[str] = (), tag: str = "py3-none-any") -> Path:
    dist = name.replace("-", "_")
    path = folder / f"{dist}-{version}-{tag}.whl"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{dist}/__init__.py", "")
        archive.writestr(f"{dist}-{version}.dist-info/METADATA", meta)
        archive.writestr(
            f"{dist}-{version}.dist-info/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: {tag}\n"
        )
        archive.writestr(f"{dist}-{version}.dist-info/RECORD", "")
    return path


def make_sdist(folder: Path, name: str, version: str, requires: Sequence[str] = ()) -> Path:
    path = folder / f"{name}-{version}.tar.gz"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    with tarfile.open(path, "w:gz") as archive:
        data = meta.encode()
        info = tarfile.TarInfo(f"{name}-{version}/PKG-INFO")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return path


def complete_folder(folder: Path, pyproject: Path) -> Path:
    """One made-up distribution per requirement of evoteam the image lacks, at a version that satisfies it."""
    folder.mkdir(parents=True, exist_ok=True)
    for req in project_requirements(pyproject):
        name = canonicalize_name(req.name)
        if name in IMAGE_HOLDS:
            continue
        version = next(v for v in [*(s.version for s in req.specifier), "1.0"] if req.specifier.contains(v))
        (make_sdist if name in SOURCE_ONLY else make_wheel)(folder, name, version)
    return folder
