"""The candidate lint: each rule fires on its construct with a line and a reason, comments and OpenMP are
not flagged, the honest kernels of the examples and tests are clean, and the adversarial ones are not."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import KERNELS, REPO
from evoteam.gpu_bench.build.lint import TOOL, lint_source
from evoteam.gpu_bench.schema import Severity

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("code", "rule"),
    [
        ("std::thread t(work);", "threads"),
        ("pthread_create(&t, nullptr, f, nullptr);", "threads"),
        ("if (fork() == 0) {}", "processes"),
        ('system("ls");', "processes"),
        ("signal(SIGALRM, handler);", "signals"),
        ("alarm(1);", "signals"),
        ('FILE* f = fopen("/proc/self/maps", "r");', "proc"),
        ("#include <Python.h>", "python"),
        ("PyRun_SimpleString(code);", "python"),
        ("cudaStreamCreate(&s);", "streams"),
        ("kernel<<<g, b, 0, cudaStreamPerThread>>>(x);", "streams"),
        ("fesetround(FE_UPWARD);", "fp-state"),
        ("_MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);", "fp-state"),
        ('setenv("OMP_NUM_THREADS", "1", 1);', "environment"),
        ("sched_setaffinity(0, sizeof(set), &set);", "affinity"),
        ("static int calls = 0;", "state"),
        ("static const float* last_x = nullptr;", "state"),
        ("static std::map<int64_t, Plan> plans;", "state"),
    ],
)
def test_each_rule_fires_with_its_line(code: str, rule: str) -> None:
    found = lint_source("k.cpp", f"// a kernel\nint x;\n  {code}\n")
    assert [(d.code, d.line, d.severity, d.tool) for d in found] == [(f"{TOOL}/{rule}", 3, Severity.WARNING, TOOL)]
    construct, _, reason = found[0].message.partition(": ")
    assert f"  {code}"[found[0].column - 1 :].startswith(construct) and reason  # its column, then why


def test_comments_and_openmp_are_not_flagged() -> None:
    text = '// fork() here would be bad\n/* signal(SIGALRM, h);\n   system("x"); */\n#pragma omp parallel for\n'
    assert lint_source("k.cpp", text) == []


def test_constants_and_static_functions_are_not_state() -> None:
    text = (
        "static const int kBlock = 256;\nstatic const float kTable[4] = {1, 2, 3, 4};\nstatic constexpr int kN = 8;\n"
    )
    text += (
        "static int helper(int x) {\n  return static_cast<int>(x);\n}\nstatic inline float f(float x) { return x; }\n"
    )
    assert lint_source("k.cpp", text) == []


def honest_sources() -> list[Path]:
    files = sorted((REPO / "examples" / "rmsnorm" / "kernels").glob("*"))
    files += [KERNELS / name for name in ("honest.cpp", "axpy.cpp", "tunable_scale_add.cpp")]
    return [*files, KERNELS / "cuda" / "scale_add.cu", KERNELS / "cuda" / "scale_add_kernel.cu"]


@pytest.mark.parametrize("path", honest_sources(), ids=lambda p: p.name)
def test_honest_kernels_are_clean(path: Path) -> None:
    assert lint_source(path.name, path.read_text()) == []


@pytest.mark.parametrize(
    ("name", "rules"),
    [
        ("fork_bomb.cpp", {"processes"}),
        ("leaves_state.cpp", {"signals", "fp-state", "environment"}),
        ("cuda/other_stream.cu", {"streams"}),
        ("timing_cheat.cpp", {"state"}),
    ],
)
def test_adversarial_kernels_are_flagged(name: str, rules: set[str]) -> None:
    found = {d.code.removeprefix(f"{TOOL}/") for d in lint_source(name, (KERNELS / name).read_text()) if d.code}
    assert rules <= found
