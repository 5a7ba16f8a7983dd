"""Shared fixtures: the tiny scale_add task, solutions built from files in tests/kernels, a warm runner."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch

from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.bindings import Kernel
from evoteam.gpu_bench.result import CandidateResult
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.schema import Binding, BuildSpec, Definition, Language, Solution, SourceFile, Workload
from evoteam.gpu_bench.task import KernelTask, load_definition, load_workloads
from evoteam.gpu_bench.timing.statistics import TimingConfig
from evoteam.gpu_bench.verify.reference import reference_solution
from evoteam.gpu_bench.worker.evaluate import EvalConfig

TESTS = Path(__file__).parent
DATA = TESTS / "data"
KERNELS = TESTS / "kernels"
REPO = TESTS.parent
SHARED_DATA = REPO.parent / "shared" / "data" / "flashinfer-trace"

# The test tiers: one tier marker per test, and the unit tier's guard (tests/tiers.py, docs/testing.md).
pytest_plugins = ["tiers"]


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """The ini options of the dev plugins (pyproject.toml sets them) stay known where a plugin is not installed
    (a base install plus pytest): pytest would warn about them, and warnings are errors here."""
    for plugin, names in (
        ("asyncio", ("asyncio_mode", "asyncio_default_fixture_loop_scope")),
        ("timeout", ("timeout",)),
    ):
        if not pluginmanager.has_plugin(plugin):
            for name in names:
                parser.addini(name, f"used by pytest-{plugin}, which is not installed here")


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("timeout"):  # the marker stays known (--strict-markers) without it
        config.addinivalue_line("markers", "timeout(seconds): pytest-timeout's limit (not installed here: none)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``gpu`` run only where torch sees a CUDA device; elsewhere they are skipped, not failed."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is false)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def run_seed(env: str) -> int:
    """A seed that is new on each run but the same in every pytest-xdist worker of one run (test ids that carry it
    must match across workers); the variable ``env`` repeats a given one."""
    if value := os.environ.get(env):
        return int(value)
    if shared := os.environ.get("PYTEST_XDIST_TESTRUNUID"):
        return int(hashlib.sha256(shared.encode()).hexdigest(), 16) % 1_000_000
    return random.randrange(1_000_000)


QUICK_TIMING = TimingConfig(warmup_s=0.002, min_samples=5, max_samples=20, max_time_s=0.05, flush_cache=False)


def quick_config(**changes: object) -> EvalConfig:
    return EvalConfig(timeout_s=20.0, timing=QUICK_TIMING).model_copy(update=changes)


@pytest.fixture(scope="session")
def definition() -> Definition:
    return load_definition(DATA / "scale_add.json")


@pytest.fixture(scope="session")
def workloads() -> list[Workload]:
    return load_workloads(DATA / "scale_add.jsonl")


def scale_add_task(kernel: str = "honest.cpp", **changes: object) -> KernelTask:
    """The scale_add task of tests/data with its source in tests/kernels (fields overridable)."""
    values: dict[str, object] = {
        "name": "scale_add",
        "source": KERNELS / kernel,
        "language": "cpp",
        "binding": "c",
        "entry": "scale_add",
        "definition": DATA / "scale_add.json",
        "workloads": DATA / "scale_add.jsonl",
        "flags": ["-O2"],
    }
    values.update(changes)
    return KernelTask.model_validate(values)


def kernel_solution(filename: str, definition_name: str = "scale_add_f32", symbol: str | None = None) -> Solution:
    path = KERNELS / filename
    python = path.suffix == ".py"
    dps = not filename.startswith(("wrong_",))
    spec = BuildSpec(
        language=Language.PYTHON if python else Language.CPP,
        target_hardware=["cpu"],
        entry_point=f"{path.name}::{symbol or ('run' if python else 'scale_add')}",
        binding=Binding.PYTHON if python else Binding.C,
        destination_passing_style=dps,
        compile_flags=["-O2"],
    )
    return Solution(
        name=path.stem,
        definition=definition_name,
        author="tests",
        spec=spec,
        sources=[SourceFile(path=path.name, content=path.read_text())],
    )


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRunner]:
    r = LocalRunner(cache_root=tmp_path_factory.mktemp("build-cache"), memory_limit_mb=4096)
    try:
        yield r
    finally:
        r.close()


@pytest.fixture(scope="module")
def evaluator(runner: LocalRunner) -> Evaluator:
    return Evaluator(runner)


class Bench:
    def __init__(self, evaluator: Evaluator, definition: Definition, workloads: list[Workload]) -> None:
        self.evaluator = evaluator
        self.definition = definition
        self.workloads = workloads

    def __call__(self, filename: str, config: EvalConfig | None = None, **kw: object) -> CandidateResult:
        workloads = self.workloads
        if "only" in kw:
            workloads = [w for w in workloads if w.uuid in kw["only"]]  # type: ignore[operator]
        return self.evaluator.evaluate(
            self.definition,
            workloads,
            kernel_solution(filename),
            reference_solution(self.definition),
            config or quick_config(),
        )


@pytest.fixture(scope="module")
def bench(evaluator: Evaluator, definition: Definition, workloads: list[Workload]) -> Bench:
    return Bench(evaluator, definition, workloads)


def git(repo: Path, *args: str) -> str:
    """Runs git in ``repo`` and returns its output (raises on failure)."""
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def init_repo(root: Path) -> Path:
    """A new git repository at ``root`` with a committer identity of its own."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Someone")
    git(root, "config", "user.email", "someone@example.com")
    return root


SCALE_ADD_TOML = """
[[kernel]]
name = "scale_add"
source = "kernel.cpp"
language = "cpp"
binding = "c"
entry = "scale_add"
definition = "scale_add.json"
workloads = "scale_add.jsonl"
flags = ["-O2"]
knobs = { PASSES = [1, 64], BLOCK = [256] }
"""
"""The ``evoteam.toml`` of ``scale_add_repo``: one CPU kernel task, ``kernel.cpp`` with entry ``scale_add``, whose
knob ``PASSES`` the offline team tunes (from the slow start's 64 to 1: an improvement no busy machine hides). The
source's other knob, BLOCK, is declared with its one value: a climb that spent its few evaluations on block
sizes (a few percent, either way, with the machine's load) would make whether a run has a candidate luck."""
CLI_PATH = "/usr/bin:/bin:/usr/local/bin"


def scale_add_repo(root: Path, toml: str = SCALE_ADD_TOML) -> Path:
    """A committed git repository with the slow scale_add kernel as ``kernel.cpp`` and its task files."""
    init_repo(root)
    shutil.copyfile(KERNELS / "slow_scale_add.cpp", root / "kernel.cpp")
    for name in ("scale_add.json", "scale_add.jsonl"):
        shutil.copyfile(DATA / name, root / name)
    (root / "evoteam.toml").write_text(toml)
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "kernel")
    return root


@contextlib.contextmanager
def benchmark_script(name: str) -> Iterator[ModuleType]:
    """``benchmarks/NAME.py`` loaded as a module (the benchmarks are scripts, not a package), for the time of
    the ``with`` block."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def cli_env(repo: Path) -> dict[str, str]:
    """A small environment for the CLI (HOME beside the repository, so build caches stay out of it; one thread
    for torch's reference: on a shared 2-core machine a second thread that another process preempts stalls
    every parallel op)."""
    return {"PATH": CLI_PATH, "HOME": str(repo.parent / "home"), "OMP_NUM_THREADS": "1"}


def evoteam(
    repo: Path, *args: str, timeout: float = 280, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``evoteam ARGS`` run in ``repo`` as a user would (``env``: instead of ``cli_env``), output captured."""
    return subprocess.run(
        [sys.executable, "-m", "evoteam.cli.main", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env if env is not None else cli_env(repo),
    )


OWN_MEMORY_ERRNO = 13 if os.geteuid() == 0 else 0
"""What a host gets opening this test process's memory: EACCES when root runs the tests (the test holds
capabilities the host gave up), nothing when a user does (the test process is dumpable)."""


def counts_after_calls(kernel: Kernel, calls: int = 20) -> list[tuple[float, float]]:
    """Calls a scale_add kernel that leaves a thread counting in ``out[0]`` ``calls`` times, reading the count
    at once after each call and again 10 ms later: the pairs."""
    inputs, outputs = {"x": torch.randn(16), "y": torch.randn(16)}, {"out": torch.zeros(16)}
    call = kernel.bind(inputs, outputs, {"n": 16})
    readings = []
    for _ in range(calls):
        call()
        at_once = float(outputs["out"][0])
        time.sleep(0.01)
        readings.append((at_once, float(outputs["out"][0])))
    return readings


def reach_codes(kernel: Kernel, target: int, count: int, n: int = 4096) -> list[int]:
    """Calls a probe kernel of scale_add whose ``x[0]`` is the pid ``target`` and returns the first ``count``
    elements of ``out`` (the errnos it wrote there) as ints."""
    inputs = {"x": torch.randn(n), "y": torch.randn(n)}
    outputs = {"out": torch.full((n,), float("nan"))}
    inputs["x"][0] = target
    kernel.bind(inputs, outputs, {"n": n})()
    return [int(code) for code in outputs["out"][:count].tolist()]
