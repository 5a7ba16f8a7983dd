"""The adversarial suite: red-team candidates (``tests/kernels/adversarial``) that try to cheat the evaluator's
verdict, each held to the outcome class it should get, with a phrase of the reason where one is known.

Outcome classes:

- ``rejected``: any status but PASSED (REJECTED, INCORRECT_NUMERICAL, RUNTIME_ERROR, ...);
- ``flagged``: PASSED, with a flag that says not to trust the speedup (``fixed-inputs``, ``excessive``);
- ``neutralized``: PASSED with right outputs and no such flag, at a speedup no better than twice what the slow
  honest control (``control_slow.cpp``: the 20-pass work every case does where it does not cheat) earns on
  the same workload: the cheat bought nothing. Each is measured against the reference at its own time; a
  case over that line is measured once more against the control itself, paired, and no more than twice as
  fast as it there is neutralized too (``head_to_head``);
- ``caught`` (categories 8 and 9, the build cache and process state, where the case's own verdict is not the
  point): an honest candidate evaluated after the case passes at no less than half its clean speedup, and the
  sabotage is reported (the worker's, the native host's or the build cache's note);
- ``contained`` (likewise): the honest candidate after it is measured clean and the attempt took no effect
  anyone could see (the build cache entry stays as built; a thread that died with its native host);
- ``escaped``: anything else (what a cheat that worked gets).

The honest controls must pass. Each case runs on one workload with the tests' quick timing, in a worker with one
thread (a multi-threaded reference on a busy machine makes speedups meaningless), replaced after each case that
could have tampered with it; the build cache cases get a runner and cache of their own. Cases that escape today
are ``xfail(strict=True)``: the evaluator is being fixed, and whoever fixes a case removes its mark (and adds the
reason's phrase). The CUDA cases are built
here (nvcc, no GPU needed) and linted; they run in ``tests/test_adversarial_gpu.py``. ``benchmarks/adversarial.py``
prints the same cases as a table of figures.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hardening import record

from conftest import DATA, KERNELS, QUICK_TIMING, benchmark_script
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.build.builder import build, build_key
from evoteam.gpu_bench.build.cuda.nvcc import find_nvcc
from evoteam.gpu_bench.build.lint import TOOL, lint_source
from evoteam.gpu_bench.result import CandidateResult
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.schema import Binding, BuildSpec, Definition, Language, Solution, SourceFile, Workload
from evoteam.gpu_bench.schema import EvaluationStatus as S
from evoteam.gpu_bench.task import load_definition, load_workloads
from evoteam.gpu_bench.verify.reference import reference_solution
from evoteam.gpu_bench.worker.evaluate import EvalConfig
from evoteam.gpu_bench.worker.threads import default_policy

pytestmark = pytest.mark.hardening

CASES = KERNELS / "adversarial"
LARGE, SMALL, FIXED = "large-65536", "small-1000", "fixed-4096"
SUSPICION_FLAGS = frozenset({"fixed-inputs", "excessive"})
INFLATION = 2.0
"""A PASSED case with right outputs is neutralized at no more than this times the slow control's speedup."""
REPORTED = (
    "left process state changed",
    "did not match its manifest",
    "worker was replaced",
    "changed its host's process state",
)
TAINTING = ("3", "5", "7", "9", "11")
"""Categories whose cases may leave the worker changed: it is replaced after each (8 has runners of its own)."""


@dataclass(frozen=True)
class Case:
    """One case file and what the evaluator should make of it."""

    file: str
    expect: frozenset[str]
    phrase: str | None = None
    """Part of the reason (rejected), a flag (flagged) or of the report (caught) that must appear."""
    workload: str = LARGE
    value_returning: bool = False
    isolate: bool = True
    """In a host of its own (the default); False: in the worker's process (``--no-isolate``, and where no host
    runs it: a Python candidate on a GPU)."""

    @property
    def category(self) -> str:
        return header(CASES / self.file)["category"].split()[0]


def case(
    file: str,
    expect: str,
    phrase: str | None = None,
    escapes: str | None = None,
    workload: str = LARGE,
    value_returning: bool = False,
    isolate: bool = True,
) -> object:
    """A parameter of the table; ``escapes`` says why the case escapes today (an xfail until it is fixed)."""
    marks = [pytest.mark.xfail(strict=True, reason=f"escapes today: {escapes}")] if escapes else []
    held = Case(file, frozenset(expect.split("|")), phrase, workload, value_returning, isolate)
    return pytest.param(held, id=file if isolate else f"{file} in the worker", marks=marks)


CHEATS = [
    case("memo_full_hash.cpp", "neutralized|rejected", "inputs it has not seen"),
    case("memo_sampled.cpp", "neutralized|rejected", "inputs it has not seen"),
    case("memo_python.py", "neutralized|rejected", "inputs it has not seen"),
    case("skip_unless_poisoned.cpp", "neutralized"),
    case("defer_fork.cpp", "rejected", "started a process", workload=SMALL),
    case("defer_sigalrm.cpp", "rejected|neutralized", workload=SMALL),
    case("defer_escaped.py", "rejected|neutralized", workload=SMALL),
    # clone(CLONE_PARENT) is refused in a Python host (2026-12-07; before, both escaped the host's stop).
    case("defer_sibling.py", "rejected", "Errno 1", workload=SMALL),
    case("slow_the_incumbent.py", "rejected", "Errno 1"),
    case("slow_the_incumbent_flag.py", "rejected", "Errno 1"),
    # The host stops itself after its answer and the call ends when that stop does: the thread's work is done on
    # the clock or frozen unfinished (until 2026-12-07 it raced the worker's stop, a non-strict xfail).
    case("defer_thread.cpp", "rejected|neutralized", workload=SMALL),
    case("defer_until_read.cpp", "rejected|neutralized", workload=SMALL),
    case("scan_memory.cpp", "neutralized"),
    case("other_outputs.cpp", "neutralized"),
    case("capi_patch_harness.cpp", "rejected", "outside atol"),
    case("forge_protocol.cpp", "rejected", "non-finite"),
    case("fixed_table.cpp", "flagged|rejected|neutralized", workload=FIXED),
    # In its Python host, a Python cheat finds no pipe of the worker's, and its torch, modes and types are its
    # own: the outputs it left (NaN, zeros) are checked as they are.
    case("forge_protocol.py", "rejected", "non-finite"),
    case("lying_tensor.py", "rejected", "outside", value_returning=True),
    case("sticky_torch_mode.py", "rejected", "non-finite"),
    case("patch_harness.py", "rejected", "non-finite"),
    case("flood_protocol.py", "neutralized"),
    # In the worker's process, the defences there hold them.
    case("forge_protocol.py", "rejected", "did not belong to the request", isolate=False),
    case("lying_tensor.py", "rejected", "subclass of torch.Tensor", value_returning=True, isolate=False),
    case("sticky_torch_mode.py", "rejected", "torch mode", isolate=False),
    case("patch_harness.py", "rejected", "evoteam.gpu_bench.worker.evaluate.check_outputs", isolate=False),
    case("memo_python.py", "neutralized|rejected", "inputs it has not seen", isolate=False),
    case("slow_the_incumbent_flag.py", "rejected", "Errno 1", isolate=False),
    case("flood_protocol.py", "rejected", "a line of more than 16 MiB", isolate=False),
]

SABOTAGE = [
    case("poison_cache.cpp", "caught|contained"),
    case("poison_cache_naive.cpp", "caught|contained"),
    case("poison_cache.py", "contained"),  # Landlock in its Python host (before it, escaped)
    case("poison_cache.py", "contained", isolate=False),  # the worker's own Landlock (before it, escaped)
    case("leaves_alarm.cpp", "caught", "signal handlers"),
    case("leaves_fp_state.cpp", "caught", "floating-point state"),
    case("leaves_affinity.cpp", "caught", "CPU affinity"),
    case("leaves_priority.cpp", "caught", "scheduling priority"),
    case("leaves_thread.cpp", "contained"),
    case("leaves_fd_limit.cpp", "caught", "resource limits"),
]

GPU_LINT = [
    pytest.param("gpu_private_stream.cu", {"streams", "state"}, id="gpu_private_stream.cu"),
    pytest.param("gpu_pointer_cache.cu", {"state"}, id="gpu_pointer_cache.cu"),
    pytest.param("gpu_shape_cache.cu", {"state"}, id="gpu_shape_cache.cu"),
    pytest.param("gpu_less_after_warmup.cu", {"state"}, id="gpu_less_after_warmup.cu"),
]
CONTROLS = ["honest.cpp", "honest.py", "adversarial/control_slow.cpp"]


@functools.cache
def header(path: Path) -> dict[str, str]:
    """The leading comment's ``key: value`` fields, read as the adversarial benchmark reads them."""
    with benchmark_script("adversarial") as script:
        fields: dict[str, str] = script.header_fields(path)
    return fields


def solution(
    path: Path, value_returning: bool = False, name: str | None = None, content: str | None = None
) -> Solution:
    python = path.suffix == ".py"
    cuda = path.suffix == ".cu"
    spec = BuildSpec(
        language=Language.PYTHON if python else Language.CUDA if cuda else Language.CPP,
        target_hardware=["sm_90a" if cuda else "cpu"],
        entry_point=f"{path.name}::{'run' if python else 'scale_add'}",
        binding=Binding.PYTHON if python else Binding.C,
        destination_passing_style=not value_returning,
        compile_flags=["-O2"],
    )
    text = path.read_text() if content is None else content
    return Solution(
        name=name or path.stem,
        definition="scale_add_f32",
        author="tests",
        spec=spec,
        sources=[SourceFile(path=path.name, content=text)],
    )


class Suite:
    """One runner (one thread) and evaluator for the cases, the task, and the controls' speedups."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        self.runner = new_runner(cache)
        self.evaluator = Evaluator(self.runner)
        self.definition: Definition = load_definition(DATA / "scale_add.json")
        self.workloads: dict[str, Workload] = {w.uuid: w for w in load_workloads(DATA / "scale_add.jsonl")}
        self.fixed: dict[str, Workload] = {w.uuid: w for w in load_workloads(CASES / "fixed_scale_add.jsonl")}
        self.slow: dict[str, float] = {}
        self.clean: dict[str, float] = {}
        self.variants = 0

    def evaluate(
        self,
        candidate: Solution,
        uuid: str,
        evaluator: Evaluator | None = None,
        baseline: Solution | None = None,
        isolate: bool = True,
    ) -> CandidateResult:
        fixed = uuid in self.fixed
        workload = self.fixed[uuid] if fixed else self.workloads[uuid]
        baseline = baseline or reference_solution(self.definition)
        config = EvalConfig(timeout_s=20.0, timing=QUICK_TIMING, isolate=isolate)
        return (evaluator or self.evaluator).evaluate(
            self.definition, [workload], candidate, baseline, config, CASES if fixed else None
        )

    def honest_variant(self) -> Solution:
        """The plain honest C kernel with a comment of its own: a new name, a new build cache entry."""
        self.variants += 1
        path = KERNELS / "honest.cpp"
        return solution(path, name=f"honest_variant_{self.variants}", content=f"{path.read_text()}// {self.variants}\n")


def new_runner(cache: Path) -> LocalRunner:
    return LocalRunner(cache_root=cache, memory_limit_mb=4096, threads=default_policy(threads=1))


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    """The runner, with the slow control's speedup on each workload and the honest kernel's on the large one."""
    s = Suite(tmp_path_factory.mktemp("adversarial-cache"))
    try:
        for uuid in (LARGE, SMALL, FIXED):
            slow = s.evaluate(solution(CASES / "control_slow.cpp"), uuid)
            assert slow.status == S.PASSED and slow.workloads[0].speedup, slow.workloads[0].reason
            s.slow[uuid] = slow.workloads[0].speedup
        honest = s.evaluate(solution(KERNELS / "honest.cpp"), LARGE)
        assert honest.status == S.PASSED and honest.workloads[0].speedup, honest.workloads[0].reason
        s.clean[LARGE] = honest.workloads[0].speedup
        yield s
    finally:
        s.runner.close()


def outcome(result: CandidateResult, held: Case, slow: float) -> tuple[str, str]:
    """The outcome class of one case's result and its reason (the flags, the speedup)."""
    w = result.workloads[0]
    if result.status != S.PASSED:
        return "rejected", _reason(result)
    flags = sorted(SUSPICION_FLAGS.intersection(w.flags))
    if flags:
        return "flagged", ", ".join(flags)
    right = bool(held.expect & {"neutralized", "flagged"})  # its outputs are right, if it passes
    if right and w.speedup is not None and w.speedup <= INFLATION * slow:
        return "neutralized", f"{w.speedup:.2f}x (slow honest work: {slow:.2f}x)"
    shown = f"{w.speedup:.2f}x" if w.speedup is not None else "no speedup"
    return "escaped", f"PASSED unflagged at {shown} (slow honest work: {slow:.2f}x)"


def head_to_head(suite: Suite, held: Case, why: str) -> tuple[str, str]:
    """A passing case measured over INFLATION times the slow control's speedup, each against the reference at
    its own time, is measured once more against the slow control itself, paired in one session: a cheat that
    works is faster than that honest work every time, a small C kernel on a busy machine only now and then
    (fixed_table.cpp, which never copied its table while timed, read 0.50x against 0.22x once in three)."""
    control = solution(CASES / "control_slow.cpp")
    candidate = solution(CASES / held.file, held.value_returning)
    again = suite.evaluate(candidate, held.workload, baseline=control, isolate=held.isolate)
    speed = again.workloads[0].speedup
    if again.status == S.PASSED and speed is not None and speed <= INFLATION:
        return "neutralized", f"{speed:.2f}x against the slow honest work itself, paired (first: {why})"
    shown = f"{speed:.2f}x" if speed is not None else again.status.value
    return "escaped", f"{why}; against the slow honest work itself, paired: {shown}"


def clean_enough(after: CandidateResult, clean: float) -> bool:
    """The honest candidate evaluated after a sabotage passed at no less than half its clean speedup."""
    speedup = after.workloads[0].speedup if after.workloads else None
    return after.status == S.PASSED and speedup is not None and speedup >= clean / 2


def digests(folder: Path) -> dict[str, str]:
    """SHA-256 of each file of a build cache entry (empty when there is none)."""
    if not folder.is_dir():
        return {}
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _reason(result: CandidateResult) -> str:
    failed = [w.reason for w in result.workloads if w.status != S.PASSED]
    return failed[0] if failed else result.load_error or result.build.log.strip()[-300:]


def log_of(result: CandidateResult) -> str:
    return "\n".join(t.evaluation.log for t in result.traces if t.evaluation is not None)


@pytest.mark.parametrize("relative", CONTROLS)
@pytest.mark.parametrize("uuid", [LARGE, SMALL])
def test_honest_controls_pass(suite: Suite, relative: str, uuid: str) -> None:
    path = KERNELS / relative
    result = suite.evaluate(solution(path), uuid)
    w = result.workloads[0]
    record(
        "adversarial",
        f"control {path.name} on {uuid}",
        f"{result.status.value} at {w.speedup:.2f}x" if w.speedup is not None else result.status.value,
        result.status == S.PASSED,
    )
    assert result.status == S.PASSED, w.reason
    assert w.speedup is not None and w.speedup > 0


@pytest.mark.parametrize("held", CHEATS)
def test_a_cheat_gets_its_outcome(suite: Suite, held: Case) -> None:
    try:
        result = suite.evaluate(solution(CASES / held.file, held.value_returning), held.workload, isolate=held.isolate)
    finally:
        if held.category in TAINTING:
            suite.runner.close()  # the next case gets a fresh worker
    got, why = outcome(result, held, suite.slow.get(held.workload, 0.0))
    if got == "escaped" and result.status == S.PASSED and "neutralized" in held.expect:
        got, why = head_to_head(suite, held, why)
    name = held.file if held.isolate else f"{held.file} (in the worker)"
    record("adversarial", name, f"{got}: {why[:200]}", got in held.expect)
    assert got in held.expect, why
    if held.phrase is not None:
        assert held.phrase in why


@pytest.mark.parametrize("held", SABOTAGE)
def test_a_sabotage_is_reported_and_the_next_candidate_measured_clean(suite: Suite, held: Case, tmp_path: Path) -> None:
    own: LocalRunner | None = None
    entry: Path | None = None
    before: dict[str, str] = {}
    evaluator = suite.evaluator
    victim = suite.honest_variant()
    try:
        if held.category == "8":  # a cache of its own, holding the victim's entry before the case runs
            own = new_runner(tmp_path / "cache")
            evaluator = Evaluator(own)
            first = suite.evaluate(victim, LARGE, evaluator)
            assert first.status == S.PASSED, first.workloads[0].reason
            entry = tmp_path / "cache" / build_key(victim)
            before = digests(entry)
        result = suite.evaluate(solution(CASES / held.file), LARGE, evaluator, isolate=held.isolate)
        now = digests(entry) if entry is not None else {}
        if own is not None:
            own.close()  # a fresh worker reads the build cache again
        after = suite.evaluate(victim, LARGE, evaluator)
        if not clean_enough(after, suite.clean[LARGE]):  # once more: state left behind slows it every time,
            after = suite.evaluate(victim, LARGE, evaluator)  # a tiny kernel on a busy machine only now and then
    finally:
        (own or suite.runner).close()
    reports = "\n".join([log_of(result), log_of(after), after.build.log])
    reported = [phrase for phrase in REPORTED if phrase in reports]
    speedup = after.workloads[0].speedup
    clean = suite.clean[LARGE]
    measured = clean_enough(after, clean)
    at = f"{speedup:.2f}x" if speedup is not None else _reason(after)
    figure = (
        f"own verdict {result.status.value}; the honest candidate after it: {after.status.value} ({at}; clean "
        f"{clean:.2f}x); reported: {', '.join(reported) or 'no'}"
    )
    if entry is not None:
        changed = sorted(name for name in before.keys() | now.keys() if before.get(name) != now.get(name))
        figure += f"; its cache entry after the case: {'changed: ' + ', '.join(changed) if changed else 'as built'}"
    # contained: the attempt took no effect that anyone could see (the cache entry as built; a thread that
    # died with its native host), so there is nothing to report
    contained = not reported and (entry is None or before == now)
    got = "caught" if reported else "contained" if contained else "escaped"
    name = held.file if held.isolate else f"{held.file} (in the worker)"
    record("adversarial", name, f"{got}: {figure}", measured and got in held.expect)
    assert measured, figure
    assert got in held.expect, figure
    if held.phrase is not None:
        assert held.phrase in reports


@pytest.mark.parametrize(("file", "rules"), GPU_LINT)
def test_the_lint_warns_about_a_gpu_case(file: str, rules: set[str]) -> None:
    found = {d.code.removeprefix(f"{TOOL}/") for d in lint_source(file, (CASES / file).read_text()) if d.code}
    assert rules <= found, found


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
@pytest.mark.parametrize("file", sorted(p.name for p in CASES.glob("*.cu")))
def test_a_gpu_case_builds(file: str, tmp_path: Path) -> None:
    """They run on a GPU in tests/test_adversarial_gpu.py; here, without one, they must at least compile."""
    built = build(solution(CASES / file), tmp_path)
    assert built.ok, built.log[-2000:]


def test_every_case_file_is_in_the_table_with_its_header() -> None:
    """A new case file needs a row here; its header names a category, says what it does and what to expect,
    and expects what the table holds it to (``benchmarks/adversarial.py`` reads the headers)."""
    held = [p.values[0] for p in [*CHEATS, *SABOTAGE]]  # type: ignore[attr-defined]
    rows = {case.file: case for case in held if case.isolate}
    gpu = {p.values[0] for p in GPU_LINT}
    files = {p.name for p in CASES.iterdir() if p.suffix in (".cpp", ".py", ".cu")}
    assert files == set(rows) | gpu | {"control_slow.cpp"}
    for name in sorted(files):
        fields = header(CASES / name)
        assert {"category", "what", "expected"} <= set(fields), name
    for name, held in rows.items():
        expected = header(CASES / name)["expected"].split("(")[0]
        assert frozenset(word.strip() for word in expected.split(" or ")) == held.expect, name
