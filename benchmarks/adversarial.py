"""The adversarial suite's figures: each red-team candidate of ``tests/kernels/adversarial`` through the evaluator.

Each case file starts with a comment that names its category, says what it does and what the evaluator should
make of it (``expected:``). Every case is evaluated on one workload of the scale_add task (``tests/data``)
against the definition's reference, paired, with short timing, in one warm ``LocalRunner`` (one thread: a
multi-threaded reference on a busy machine makes speedups meaningless) whose worker is replaced after every
case that could have tampered with it. Each gets a verdict:

- ``rejected``: a status other than PASSED;
- ``flagged``: PASSED, with a flag that says not to trust its speedup (``fixed-inputs``, ``excessive``);
- ``neutralized``: for a case whose outputs are right (one that expects ``neutralized`` or ``flagged``), PASSED
  with no such flag at a speedup no better than twice the slow honest control's on the same workload (every
  case does that slow, 20-pass work on the calls where it does not cheat): whatever it tried bought nothing;
- ``caught`` (the sabotage cases, categories 8 and 9, whose own verdict is not the point): after the case an
  honest candidate is evaluated on the same runner (after a fresh worker for the build cache), and it passes,
  at no less than half its clean speedup, and the sabotage was reported (the worker's note that it was
  replaced, or the build cache's note that an entry was rebuilt);
- ``ESCAPED``: anything else: a cheat that passed unflagged (at an inflated speedup, or with outputs that are
  wrong or not written by the call), or a sabotage that went unreported or made the honest candidate fail or
  look slow.

Then the honest controls alone (``pass`` or ``FALSE REJECTION``), the totals, and the evaluator's throughput
on the honest controls with ``EvalConfig(isolate=True)`` and ``isolate=False`` (C ABI kernels in a host process
of their own, or in the worker), alternating, and their ratio. Tables are Markdown, for
``docs/reliability.md``.

It is a benchmark, not a test (``tests/test_adversarial_suite.py`` asserts each case's outcome): it prints
figures and exits 0 unless a control failed or the evaluator could not run. Run from the repository root:
``python benchmarks/adversarial.py`` (``--quick``: one throughput round on one workload; ``--cases a,b``: only
those cases; ``--only-throughput --threads 2``: the throughput alone, its kernels on two threads).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from evoteam.gpu_bench.api import (
    Binding,
    BuildSpec,
    CandidateResult,
    Definition,
    EvalConfig,
    EvaluationStatus,
    Evaluator,
    Language,
    LocalRunner,
    Solution,
    SourceFile,
    TimingConfig,
    Workload,
    cpu_name,
    load_definition,
    load_workloads,
    reference_solution,
    thread_policy,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = REPO_ROOT / "tests" / "data"
KERNELS = REPO_ROOT / "tests" / "kernels"
CASES = KERNELS / "adversarial"
DEFAULT_WORKLOAD = "large-65536"
TIMING = TimingConfig(warmup_s=0.002, min_samples=5, max_samples=20, max_time_s=0.05, flush_cache=False)
"""The test suite's quick timing (tests/conftest.py's QUICK_TIMING)."""
SUSPICION_FLAGS = frozenset({"fixed-inputs", "excessive"})
"""Flags that say a speedup is not to be trusted as it stands (``noise`` and ``contended`` are about the
measurement, not the candidate)."""
INFLATION = 2.0
"""A PASSED cheat is neutralized when its speedup is at most this times the slow honest control's."""
SABOTAGE = ("8", "9")
"""Categories whose cases are judged by the next honest candidate (the build cache, process state)."""
TAINTING = ("3", "5", "7", "8", "9", "11")
"""Categories whose cases may leave the worker changed: it is replaced after each of them."""
CONTROLS = ("honest.cpp", "honest.py", "adversarial/control_slow.cpp")
"""The honest controls, relative to tests/kernels: the plain kernels and the slow one."""
REPORTED = (
    "left process state changed",
    "did not match its manifest",
    "worker was replaced",
    "changed its host's process state",
)


@dataclass(frozen=True)
class Case:
    """One file of tests/kernels/adversarial, as its header comment describes it."""

    path: Path
    category: str
    what: str
    expected: frozenset[str]
    value_returning: bool = False
    workload: str = DEFAULT_WORKLOAD
    workloads_file: Path = DATA / "scale_add.jsonl"

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def number(self) -> str:
        return self.category.split()[0]


@dataclass
class Outcome:
    """What the evaluator made of one case (and, for sabotage, of the honest candidate after it)."""

    case: Case
    result: CandidateResult
    verdict: str
    why: str
    next_result: CandidateResult | None = None

    @property
    def speedup(self) -> float | None:
        return self.result.workloads[0].speedup if self.result.workloads else None

    @property
    def flags(self) -> list[str]:
        return self.result.workloads[0].flags if self.result.workloads else []


@dataclass
class Session:
    """The task, one warm runner on a private build cache, its evaluator, and the controls' speedups."""

    cache: Path
    definition: Definition
    workloads: dict[str, Workload]
    """Every workload a case may use, by uuid: the task's and those of the cases' own workload files."""
    blob_roots: dict[str, Path]
    """Where the blobs of a case's own workloads are (by uuid)."""
    runner: LocalRunner
    evaluator: Evaluator
    config: EvalConfig
    slow: dict[str, float] = field(default_factory=dict)
    """The slow honest control's speedup per workload (the yardstick of ``neutralized``)."""
    clean: dict[str, float] = field(default_factory=dict)
    """The plain honest C kernel's speedup per workload (the yardstick of the honest candidate after sabotage)."""
    variants: int = 0


def header_fields(path: Path) -> dict[str, str]:
    """The ``key: value`` fields of a case file's leading comment; a field's continuation lines are indented."""
    prefix = "#" if path.suffix == ".py" else "//"
    fields: dict[str, str] = {}
    key = ""
    for line in path.read_text().splitlines():
        if not line.startswith(prefix):
            break
        text = line[len(prefix) :]
        match = re.match(r" (\w+): (.*)", text)
        if match:
            key = match.group(1)
            fields[key] = match.group(2).strip()
        elif key and text.startswith("   "):
            fields[key] += " " + text.strip()
    return fields


def parse_header(path: Path) -> Case:
    """The ``category:``, ``what:``, ``expected:`` (and optional ``binding:``, ``workload:``, ``workloads:``)
    fields of a case file's leading comment (``header_fields``)."""
    fields = header_fields(path)
    for needed in ("category", "what", "expected"):
        if needed not in fields:
            raise ValueError(f"{path.name}: its header comment has no '{needed}:' line")
    classes = fields["expected"].split("(")[0]
    expected = frozenset(word.strip() for word in classes.split(" or "))
    workloads = fields.get("workloads", "").split()[0] if fields.get("workloads") else None
    return Case(
        path=path,
        category=fields["category"],
        what=fields["what"],
        expected=expected,
        value_returning="value-returning" in fields.get("binding", ""),
        workload=fields.get("workload", DEFAULT_WORKLOAD).split()[0],
        workloads_file=path.parent / workloads if workloads else DATA / "scale_add.jsonl",
    )


def load_cases(folder: Path = CASES, only: Sequence[str] = ()) -> list[Case]:
    """Every CPU case (C++ and Python) of ``folder`` but the controls, sorted by category then name."""
    paths = sorted(p for p in folder.iterdir() if p.suffix in (".cpp", ".py"))
    cases = [parse_header(p) for p in paths]
    cases = [c for c in cases if c.category != "control" and (not only or c.path.stem in only or c.name in only)]
    return sorted(cases, key=lambda c: (int(c.number), c.name))


def solution(
    path: Path, value_returning: bool = False, name: str | None = None, content: str | None = None
) -> Solution:
    """The scale_add solution of one kernel file: the C ABI for C++, the python binding for Python."""
    python = path.suffix == ".py"
    spec = BuildSpec(
        language=Language.PYTHON if python else Language.CPP,
        target_hardware=["cpu"],
        entry_point=f"{path.name}::{'run' if python else 'scale_add'}",
        binding=Binding.PYTHON if python else Binding.C,
        destination_passing_style=not value_returning,
        compile_flags=["-O2"],
    )
    text = path.read_text() if content is None else content
    return Solution(
        name=name or path.stem,
        definition="scale_add_f32",
        author="adversarial",
        spec=spec,
        sources=[SourceFile(path=path.name, content=text)],
    )


def honest_variant(session: Session) -> Solution:
    """The plain honest C kernel under a new name and with a new comment: its own build cache entry."""
    session.variants += 1
    path = KERNELS / "honest.cpp"
    content = f"{path.read_text()}// variant {session.variants} ({os.getpid()})\n"
    return solution(path, name=f"honest_variant_{session.variants}", content=content)


def new_runner(cache: Path, threads: int = 1) -> LocalRunner:
    """A runner whose worker uses ``threads`` threads (one by default: torch's reference stays single-threaded,
    so a busy machine slows both kernels of a pair alike instead of stalling the reference's threads)."""
    return LocalRunner(cache_root=cache, memory_limit_mb=4096, threads=thread_policy(threads=threads))


def open_session(cache: Path, config: EvalConfig | None = None, cases: Sequence[Case] = ()) -> Session:
    """A session whose build caches live under ``cache`` (the caller's to remove), knowing the task's workloads
    and those of ``cases``' own workload files."""
    runner = new_runner(cache / "shared")
    definition = load_definition(DATA / "scale_add.json")
    workloads = {w.uuid: w for w in load_workloads(DATA / "scale_add.jsonl")}
    blob_roots: dict[str, Path] = {}
    for case in cases:
        if case.workloads_file != DATA / "scale_add.jsonl":
            for w in load_workloads(case.workloads_file):
                workloads[w.uuid] = w
                blob_roots[w.uuid] = case.workloads_file.parent
    config = config or EvalConfig(timeout_s=20.0, timing=TIMING)
    return Session(cache, definition, workloads, blob_roots, runner, Evaluator(runner), config)


def evaluate(
    session: Session,
    candidate: Solution,
    workload: Workload,
    blob_root: Path | None = None,
    evaluator: Evaluator | None = None,
    baseline: Solution | None = None,
) -> CandidateResult:
    baseline = baseline or reference_solution(session.definition)
    chosen = evaluator or session.evaluator
    return chosen.evaluate(session.definition, [workload], candidate, baseline, session.config, blob_root)


def measure_controls(session: Session, uuids: Sequence[str]) -> list[Outcome]:
    """The honest controls on each workload the cases use; their speedups become the session's yardsticks."""
    outcomes: list[Outcome] = []
    for uuid in uuids:
        for relative in CONTROLS:
            path = KERNELS / relative
            result = evaluate(session, solution(path), session.workloads[uuid], session.blob_roots.get(uuid))
            speedup = result.workloads[0].speedup
            if result.status == EvaluationStatus.PASSED and speedup is not None:
                if relative.endswith("control_slow.cpp"):
                    session.slow[uuid] = speedup
                if relative == "honest.cpp":
                    session.clean[uuid] = speedup
            passed = result.status == EvaluationStatus.PASSED
            control = Case(path=path, category="control", what="honest", expected=frozenset({"pass"}), workload=uuid)
            verdict = "pass" if passed else "FALSE REJECTION"
            outcomes.append(Outcome(control, result, verdict, "" if passed else _reason(result)))
    return outcomes


def run_case(session: Session, case: Case) -> Outcome:
    """Evaluates ``case`` (and, for sabotage, the honest candidate after it) and gives its verdict. A build cache
    case gets a runner and cache of its own, holding the honest candidate's entry before the case runs."""
    workload, blob_root = session.workloads[case.workload], session.blob_roots.get(case.workload)
    large = session.workloads[DEFAULT_WORKLOAD]
    runner = new_runner(session.cache / case.path.stem) if case.number == "8" else session.runner
    evaluator = Evaluator(runner) if case.number == "8" else session.evaluator
    after: CandidateResult | None = None
    victim = honest_variant(session) if case.number in SABOTAGE else None
    try:
        if victim is not None and case.number == "8":
            evaluate(session, victim, large, None, evaluator)
        result = evaluate(session, solution(case.path, case.value_returning), workload, blob_root, evaluator)
        if case.number == "8":
            runner.close()  # a fresh worker reads the build cache again
        if victim is not None:
            after = evaluate(session, victim, large, None, evaluator)
            if _judge_sabotage(session, result, after)[0] == "ESCAPED":  # once more: state left behind slows it
                after = evaluate(session, victim, large, None, evaluator)  # every time, noise only now and then
    finally:
        if case.number in TAINTING:
            runner.close()
    verdict, why = judge(session, case, result, after)
    return Outcome(case, result, verdict, why, after)


def judge(session: Session, case: Case, result: CandidateResult, after: CandidateResult | None) -> tuple[str, str]:
    """The verdict of one case and the evidence for it, in a few words."""
    if after is not None:
        return _judge_sabotage(session, result, after)
    if result.status != EvaluationStatus.PASSED:
        return "rejected", _reason(result)
    w = result.workloads[0]
    suspicious = sorted(SUSPICION_FLAGS.intersection(w.flags))
    if suspicious:
        return "flagged", ", ".join(suspicious)
    slow = session.slow.get(w.uuid)
    neutral = "neutralized" in case.expected or "flagged" in case.expected  # its outputs are right
    if neutral and w.speedup is not None and slow is not None and w.speedup <= INFLATION * slow:
        return "neutralized", f"{w.speedup:.2f}x, slow honest work earns {slow:.2f}x"
    earns = f", slow honest work earns {slow:.2f}x" if slow is not None else ""
    shown = f"{w.speedup:.2f}x" if w.speedup is not None else "no speedup"
    if neutral:  # measured against the reference at different times: settle it head to head, paired
        control = solution(CASES / "control_slow.cpp")
        workload, blob_root = session.workloads[case.workload], session.blob_roots.get(case.workload)
        again = evaluate(session, solution(case.path, case.value_returning), workload, blob_root, baseline=control)
        speed = again.workloads[0].speedup
        if again.status == EvaluationStatus.PASSED and speed is not None and speed <= INFLATION:
            first = f"first {shown}{earns}"
            return "neutralized", f"{speed:.2f}x against the slow honest work itself, paired ({first})"
        paired = f"{speed:.2f}x" if speed is not None else again.status.value
        return "ESCAPED", f"PASSED unflagged at {shown}{earns}; against the slow honest work itself, paired: {paired}"
    return "ESCAPED", f"PASSED unflagged at {shown}{earns}"


def _judge_sabotage(session: Session, result: CandidateResult, after: CandidateResult) -> tuple[str, str]:
    logs = _log(result) + "\n" + _log(after) + "\n" + after.build.log
    reported = [phrase for phrase in REPORTED if phrase in logs]
    w = after.workloads[0] if after.workloads else None
    clean = session.clean.get(DEFAULT_WORKLOAD)
    if after.status != EvaluationStatus.PASSED or w is None or w.speedup is None:
        return "ESCAPED", f"the honest candidate after it: {after.status.value}: {_reason(after)}"
    if clean is not None and w.speedup < clean / 2:
        return "ESCAPED", f"the honest candidate after it measured {w.speedup:.2f}x (clean: {clean:.2f}x)"
    if not reported:  # measured clean and nothing reported: the attempt took no effect (native host, Landlock)
        return "contained", f"nothing to report; the honest candidate after it: {w.speedup:.2f}x"
    return "caught", f"reported ({reported[0]}); the honest candidate after it: {w.speedup:.2f}x"


def _log(result: CandidateResult) -> str:
    return "\n".join(t.evaluation.log for t in result.traces if t.evaluation is not None)


def _reason(result: CandidateResult) -> str:
    if result.load_error:
        return result.load_error
    failed = [w for w in result.workloads if w.status != EvaluationStatus.PASSED]
    if failed:
        return failed[0].reason
    return "" if result.build.ok else result.build.log.strip()[-300:]


def lint_codes(result: CandidateResult) -> list[str]:
    """The evoteam-lint rules the case's build reported."""
    codes = (d.code for d in result.build.diagnostics if d.code and d.code.startswith("evoteam-lint/"))
    return sorted({code.split("/", 1)[1] for code in codes})


def cases_table(outcomes: Sequence[Outcome]) -> str:
    lines = [
        "| case | category | workload | expected | status | flags | speedup | verdict | lint | why |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for o in outcomes:
        cells = [
            f"`{o.case.name}`",
            o.case.category,
            o.case.workload,
            " or ".join(sorted(o.case.expected)),
            o.result.status.value,
            ", ".join(o.flags) or "-",
            f"{o.speedup:.2f}" if o.speedup is not None else "-",
            f"**{o.verdict}**" if o.verdict in ("ESCAPED", "FALSE REJECTION") else o.verdict,
            ", ".join(lint_codes(o.result)) or "-",
            _cell(o.why),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(text: str, limit: int = 160) -> str:
    one = " ".join(text.split())
    one = one if len(one) <= limit else one[: limit - 3] + "..."
    return one.replace("|", "\\|") or "-"


def totals(cases: Sequence[Outcome], controls: Sequence[Outcome]) -> str:
    kinds = ("rejected", "flagged", "neutralized", "caught", "contained")
    count = {v: sum(1 for o in cases if o.verdict == v) for v in kinds}
    escaped = [o.case.name for o in cases if o.verdict == "ESCAPED"]
    unexpected = [o.case.name for o in cases if o.verdict not in o.case.expected and o.verdict != "ESCAPED"]
    false = [f"{o.case.name} on {o.case.workload}" for o in controls if o.verdict != "pass"]
    lines = [
        f"cases tried: {len(cases)}; rejected {count['rejected']}, flagged {count['flagged']}, "
        f"neutralized {count['neutralized']}, caught (sabotage) {count['caught']}, contained (sabotage) "
        f"{count['contained']}, escaped {len(escaped)}",
        f"escaped: {', '.join(escaped) or 'none'}",
        f"held, but not as their header expects: {', '.join(unexpected) or 'none'}",
        f"false rejections among honest controls: {len(false)} of {len(controls)}"
        + (f" ({', '.join(false)})" if false else ""),
    ]
    return "\n".join(lines)


def throughput(rounds: int, workloads: Sequence[Workload] | None = None, threads: int = 1) -> str:
    """Seconds per workload evaluation of the honest controls, isolate on and off, alternating round by round on
    two warm runners whose kernels may use ``threads`` threads (each baseline run first, excluded)."""
    definition = load_definition(DATA / "scale_add.json")
    chosen = list(workloads) if workloads is not None else load_workloads(DATA / "scale_add.jsonl")
    seconds: dict[bool, list[float]] = {True: [], False: []}
    starts: dict[bool, int] = {}
    with tempfile.TemporaryDirectory(prefix="evoteam-adversarial-tp-") as cache:
        runners = {flag: new_runner(Path(cache), threads) for flag in (True, False)}
        try:
            configs = {flag: EvalConfig(timeout_s=20.0, timing=TIMING, isolate=flag) for flag in (True, False)}
            evaluators = {flag: Evaluator(runners[flag]) for flag in (True, False)}
            baseline = reference_solution(definition)
            controls = [solution(KERNELS / c) for c in CONTROLS]
            for flag in (True, False):
                evaluators[flag].baseline_run(definition, chosen, baseline, configs[flag], None)
                for candidate in controls:  # builds and loads outside the clock
                    evaluators[flag].evaluate(definition, chosen[:1], candidate, baseline, configs[flag])
            for _ in range(rounds):
                for flag in (True, False):
                    for candidate in controls:
                        start = time.perf_counter()
                        result = evaluators[flag].evaluate(definition, chosen, candidate, baseline, configs[flag])
                        elapsed = time.perf_counter() - start
                        if result.status != EvaluationStatus.PASSED:
                            raise SystemExit(f"control {candidate.name} (isolate={flag}): {result.status.value}")
                        seconds[flag].append(elapsed / len(chosen))
            starts = {flag: runners[flag].worker_starts for flag in (True, False)}
        finally:
            for runner in runners.values():
                runner.close()
    on, off = statistics.median(seconds[True]), statistics.median(seconds[False])
    declared = "isolate" in EvalConfig.model_fields
    lines = [
        f"throughput on the honest controls ({', '.join(CONTROLS)}), {len(chosen)} workload(s) each, "
        f"{rounds} round(s), alternating, {threads} thread(s); "
        f"EvalConfig.isolate {'declared' if declared else 'NOT declared (ignored)'}",
        "",
        "| EvalConfig | s per workload (median) | workloads per s | evaluations | worker starts |",
        "| --- | --- | --- | --- | --- |",
        f"| isolate=True | {on:.4f} | {1 / on:.1f} | {len(seconds[True])} | {starts.get(True, 0)} |",
        f"| isolate=False | {off:.4f} | {1 / off:.1f} | {len(seconds[False])} | {starts.get(False, 0)} |",
        "",
        f"isolate=True / isolate=False time per workload: {on / off:.2f}x",
    ]
    return "\n".join(lines)


def _load() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load average: unknown"
    return f"load average (1/5/15 min): {one:.2f} {five:.2f} {fifteen:.2f}"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="one throughput round on one workload (default: 5, all)")
    p.add_argument("--cases", default="", help="comma-separated case names (file or stem; default: every case)")
    p.add_argument("--rounds", type=int, default=None, help="throughput rounds (default 5, --quick 1)")
    p.add_argument("--skip-throughput", action="store_true", help="only the cases")
    p.add_argument("--only-throughput", action="store_true", help="only the throughput (no case, no control)")
    p.add_argument(
        "--threads", type=int, default=1, help="threads the throughput's kernels may use (default 1, as the cases)"
    )
    return p.parse_args(argv)


def cases_and_controls(cases: Sequence[Case]) -> list[Outcome]:
    """Runs the cases and the honest controls in one session, prints their tables and totals; the controls'
    outcomes."""
    with tempfile.TemporaryDirectory(prefix="evoteam-adversarial-") as cache:
        session = open_session(Path(cache), cases=cases)
        try:
            uuids = {c.workload for c in cases} | {DEFAULT_WORKLOAD}
            controls = measure_controls(session, sorted(uuids))
            outcomes = [run_case(session, case) for case in cases]
        finally:
            session.runner.close()
    print()
    print(f"### Adversarial cases ({len(outcomes)}), one workload each, against the reference, paired")
    print()
    print(cases_table(outcomes))
    print()
    print("### Honest controls")
    print()
    print(cases_table(controls))
    print()
    print(totals(outcomes, controls))
    return controls


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(given)
    only = [c.strip() for c in args.cases.split(",") if c.strip()]
    cases = load_cases(only=only)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"command: {shlex.join(['python', 'benchmarks/adversarial.py', *given])}")
    print(
        f"machine: {cpu_name()}; {os.cpu_count()} logical cores ({usable} usable); "
        f"Python {platform.python_version()}; {platform.system()} {platform.release()}"
    )
    print(f"{_load()} (other processes on this machine compete for its cores)")
    start = time.perf_counter()
    controls: list[Outcome] = []
    if not args.only_throughput:
        controls = cases_and_controls(cases)
    if not args.skip_throughput:
        rounds = args.rounds if args.rounds is not None else (1 if args.quick else 5)
        workloads = {w.uuid: w for w in load_workloads(DATA / "scale_add.jsonl")}
        chosen = [workloads[DEFAULT_WORKLOAD]] if args.quick else None
        print()
        print(throughput(rounds, chosen, args.threads))
    print()
    print(_load())
    print(f"total wall time: {time.perf_counter() - start:.1f} s")
    return 0 if all(o.verdict == "pass" for o in controls) else 1


if __name__ == "__main__":
    raise SystemExit(main())
