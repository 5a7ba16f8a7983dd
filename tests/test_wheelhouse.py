"""The offline wheel folder for the GPU machine (gpu_bench/wheelhouse.py): what evoteam needs there, the check that
a folder is complete for the device's Python and platform (what it misses, and why), the fetch with pip's target
options, and the script run by its path on a machine where evoteam is not installed."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from conftest import REPO
from evoteam.gpu_bench import wheelhouse
from evoteam.gpu_bench.wheelhouse import IMAGE_HOLDS, Target, check, main, project_requirements, to_fetch
from wheel_files import make_sdist, make_wheel

PYPROJECT = REPO / "pyproject.toml"


def reqs(*lines: str) -> list[Requirement]:
    return [Requirement(line) for line in lines]


@pytest.mark.unit
def test_what_evoteam_needs_on_the_device_comes_from_pyproject_less_what_the_image_holds() -> None:
    roots = project_requirements(PYPROJECT)
    names = {r.name.lower() for r in roots}
    assert {
        "pydantic",
        "pygls",
        "anthropic",
        "gitpython",
        "watchdog",
        "pycuda",
        "pytest-timeout",
        "setuptools",
    } <= names
    wheels, sources = to_fetch(roots)
    fetched = {Requirement(line).name.lower() for line in wheels}
    assert sources == ["pycuda"]  # source-only: built on the device
    assert "torch" not in fetched and "numpy" not in fetched and "matplotlib" not in fetched
    assert {"pydantic", "pygls", "lsprotocol", "anthropic", "openai", "gitpython", "watchdog", "pytest"} <= fetched
    # every requirement of evoteam is fetched or held by the image: none falls between
    for req in roots:
        name = req.name.lower().replace("_", "-")
        assert name in fetched or name in IMAGE_HOLDS or name in sources, name


@pytest.mark.unit
def test_an_unknown_extra_is_a_clear_error(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\ndependencies = []\n[project.optional-dependencies]\ngpu = []\n')
    with pytest.raises(ValueError, match="no extra named 'device-check'"):
        project_requirements(pyproject)


@pytest.mark.unit
def test_a_complete_folder_follows_requirements_through_wheels_and_source_archives(tmp_path: Path) -> None:
    make_wheel(tmp_path, "alpha", "2.0", ["beta>=1.5", 'gamma; python_version < "3.11"', 'delta; extra == "docs"'])
    make_wheel(tmp_path, "beta", "1.6", ["torch>=2"])  # the image holds torch
    make_sdist(tmp_path, "pycuda", "2026.1", ["pytools>=2011.2", "numpy>=1.24"])
    make_wheel(tmp_path, "pytools", "2026.1.1", ["siphash24>=1.6"])
    make_wheel(tmp_path, "siphash24", "1.9", tag="cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64")
    make_wheel(tmp_path, "zeta", "1.0", tag="cp38-abi3-manylinux_2_28_x86_64")
    report = check(tmp_path, reqs("alpha>=2", "pycuda>=2024.1", "zeta"))
    assert report.complete, report.render()
    assert len(report.distributions) == 6
    rendered = report.render()
    assert rendered.startswith("6 files, ") and "for CPython 3.12 on Linux x86_64" in rendered
    assert "built there from source: pycuda" in rendered and rendered.endswith("complete")


@pytest.mark.unit
def test_what_a_folder_misses_is_named_with_who_needs_it(tmp_path: Path) -> None:
    make_wheel(tmp_path, "alpha", "2.0", ["beta>=1.5", "epsilon"])
    make_wheel(tmp_path, "beta", "1.2")  # too old for alpha
    report = check(tmp_path, reqs("alpha", "pydantic>=2.7"))
    assert not report.complete
    assert report.missing == [
        "pydantic>=2.7 (needed by evoteam)",
        "beta>=1.5 (needed by alpha 2.0); the folder has 1.2",
        "epsilon (needed by alpha 2.0)",
    ]
    assert report.render().endswith("incomplete: the device check's offline install would fail")


@pytest.mark.unit
def test_wheels_for_another_python_or_platform_are_passed_by_and_broken_files_are_unusable(tmp_path: Path) -> None:
    make_wheel(tmp_path, "alpha", "1.0", tag="cp311-cp311-manylinux_2_17_x86_64")
    make_wheel(tmp_path, "beta", "1.0", tag="cp312-cp312-macosx_11_0_arm64")
    make_wheel(tmp_path, "gamma", "1.0", tag="cp313-abi3-manylinux_2_17_x86_64")  # abi3 from 3.13 on
    (tmp_path / "delta-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / ".hidden").write_text("skipped")
    report = check(tmp_path, reqs("alpha", "beta", "gamma"))
    assert report.ignored == [
        "alpha-1.0-cp311-cp311-manylinux_2_17_x86_64.whl",
        "beta-1.0-cp312-cp312-macosx_11_0_arm64.whl",
        "gamma-1.0-cp313-abi3-manylinux_2_17_x86_64.whl",
    ]
    assert {line.split(":", 1)[0] for line in report.problems} == {"delta-1.0-py3-none-any.whl", "notes.txt"}
    assert [line.split(" ", 1)[0] for line in report.missing] == ["alpha", "beta", "gamma"]
    # the same folder is fine for Python 3.11 where its wheel is for 3.11
    assert not any(line.startswith("alpha") for line in check(tmp_path, reqs("alpha"), Target("3.11")).missing)
    # a wheel for another Python beside a complete folder does not make it incomplete
    make_wheel(tmp_path, "alpha", "1.0")
    (tmp_path / "delta-1.0-py3-none-any.whl").unlink()
    (tmp_path / "notes.txt").unlink()
    report = check(tmp_path, reqs("alpha"))
    assert report.complete and "ignored (not for CPython 3.12 on Linux x86_64): alpha-1.0-cp311" in report.render()


@pytest.mark.unit
def test_a_wheel_built_on_the_device_is_accepted_and_preferred_to_the_source(tmp_path: Path) -> None:
    make_sdist(tmp_path, "pycuda", "2026.1", ["pytools"])  # its requirements are not in the folder...
    make_wheel(tmp_path, "pycuda", "2026.1", tag="cp312-cp312-linux_x86_64")  # ...and the wheel has none
    report = check(tmp_path, reqs("pycuda"))
    assert report.complete, report.render()
    assert "built there from source" in report.render()  # the archive is still listed as such


class FakeDownloader:
    """Copies prepared files from a source folder, as pip download would fetch them; records each call."""

    def __init__(self, source: Path, closure: dict[str, list[str]]) -> None:
        self.source = source
        self.closure = closure  # requirement name -> the file names pip would fetch for it
        self.calls: list[tuple[str, list[str]]] = []

    def _copy(self, name: str, dest: Path) -> None:
        for filename in self.closure[name]:
            (dest / filename).write_bytes((self.source / filename).read_bytes())

    def wheels(self, requirements: Sequence[str], dest: Path, target: Target) -> None:
        self.calls.append(("wheels", list(requirements)))
        for line in requirements:
            self._copy(Requirement(line).name.lower(), dest)

    def sources(self, names: Sequence[str], dest: Path) -> None:
        self.calls.append(("sources", list(names)))
        for name in names:
            self._copy(name, dest)


@pytest.mark.unit
def test_build_fetches_wheels_then_the_source_archive_then_its_requirements(tmp_path: Path) -> None:
    source, dest = tmp_path / "index", tmp_path / "folder"
    source.mkdir()
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "x"\ndependencies = ["alpha>=1", "torch>=2.3"]\n'
        '[project.optional-dependencies]\ngpu = ["pycuda>=2024.1"]\ndevice-check = ["pytest>=8"]\n'
    )
    closure = {
        "alpha": [make_wheel(source, "alpha", "1.0", ["beta"]).name, make_wheel(source, "beta", "3.0").name],
        "pytest": [make_wheel(source, "pytest", "9.2.0").name],
        "setuptools": [make_wheel(source, "setuptools", "84.2.1").name],
        "wheel": [make_wheel(source, "wheel", "0.48.0").name],
        "pycuda": [make_sdist(source, "pycuda", "2026.1", ["pytools>=2011.2", "numpy>=1.24"]).name],
        "pytools": [make_wheel(source, "pytools", "2026.1.1").name],
    }
    downloader = FakeDownloader(source, closure)
    kept = make_wheel(_mkdir(dest), "kept", "1.0")  # a file already there (a wheel built on the device) stays
    report = wheelhouse.build(dest, pyproject, downloader)
    assert downloader.calls == [
        ("wheels", ["alpha>=1", "pytest>=8", "setuptools>=68", "wheel"]),  # torch: the image holds it
        ("sources", ["pycuda"]),
        ("wheels", ["pytools>=2011.2"]),  # numpy: the image holds it
    ]
    assert report.complete, report.render()
    assert kept.is_file()
    assert len(report.distributions) == 8


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


@pytest.mark.unit
def test_the_command_line_check_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "x"\ndependencies = ["alpha"]\n'
        "[project.optional-dependencies]\ngpu = []\ndevice-check = []\n"
    )
    folder = _mkdir(tmp_path / "wheels")
    for name in ("alpha", "setuptools", "wheel"):
        make_wheel(folder, name, "99.0")
    assert main(["check", str(folder), "--pyproject", str(pyproject)]) == 0
    assert capsys.readouterr().out.strip().endswith("complete")
    (folder / "alpha-99.0-py3-none-any.whl").unlink()
    assert main(["check", str(folder), "--pyproject", str(pyproject)]) == 1
    assert "missing: alpha (needed by evoteam)" in capsys.readouterr().out
    assert main(["check", str(tmp_path / "nowhere"), "--pyproject", str(pyproject)]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert main(["check", str(folder), "--pyproject", str(tmp_path / "none.toml")]) == 2


@pytest.mark.integration
def test_pip_fetches_for_the_target_python_not_this_one(tmp_path: Path) -> None:
    index, dest = _mkdir(tmp_path / "index"), tmp_path / "folder"
    make_wheel(index, "probe-a", "1.0", ["probe-b>=2"])
    make_wheel(index, "probe-b", "2.0", tag="cp311-cp311-manylinux_2_17_x86_64")
    make_wheel(index, "probe-b", "2.0", tag="cp312-cp312-manylinux_2_17_x86_64")
    make_wheel(index, "probe-b", "2.0", tag="cp312-cp312-macosx_11_0_arm64")
    env = {
        **os.environ,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(index),
        "PIP_CONFIG_FILE": os.devnull,  # this machine's index settings stay out
        "PIP_CONSTRAINT": "",
    }
    wheelhouse.PipDownloader(env=env).wheels(["probe-a"], _mkdir(dest), Target("3.12"))
    assert sorted(p.name for p in dest.iterdir()) == [
        "probe_a-1.0-py3-none-any.whl",
        "probe_b-2.0-cp312-cp312-manylinux_2_17_x86_64.whl",
    ]
    assert check(dest, reqs("probe-a"), Target("3.12")).complete
    with pytest.raises(RuntimeError, match="pip download failed"):
        wheelhouse.PipDownloader(env=env).wheels(["probe-c"], dest, Target("3.12"))


@pytest.mark.integration
def test_the_script_runs_by_its_path_as_the_device_check_runs_it(tmp_path: Path) -> None:
    folder = _mkdir(tmp_path / "wheels")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-I", str(REPO / "gpu_bench" / "wheelhouse.py"), "check", str(folder)],
        capture_output=True, text=True, timeout=60, check=False, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "missing: pydantic" in proc.stdout and proc.stdout.strip().endswith("would fail")
