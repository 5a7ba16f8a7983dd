"""The worker's thread policy: CPU lists, the default, the environment a worker gets, and what results record."""

from __future__ import annotations

import os

import pytest

from evoteam.gpu_bench.worker.threads import (
    THREAD_VARIABLES,
    ThreadPolicy,
    allowed_cpus,
    default_policy,
    describe_wait,
    format_cpus,
    parse_cpus,
    wait_environment,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("text", "cpus"), [("0", [0]), ("0-3,6", [0, 1, 2, 3, 6]), ("3,1,2", [1, 2, 3])])
def test_cpu_lists_parse_and_format_back(text: str, cpus: list[int]) -> None:
    assert parse_cpus(text) == cpus
    assert parse_cpus(format_cpus(cpus)) == cpus
    assert format_cpus([0, 1, 2, 3, 6]) == "0-3,6"


@pytest.mark.parametrize("bad", ["", "a", "3-1", "-2", "1-x"])
def test_a_bad_cpu_list_is_one_clear_error(bad: str) -> None:
    with pytest.raises(ValueError, match="CPU"):
        parse_cpus(bad)


def test_the_default_is_every_allowed_cpu_with_a_thread_each(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    policy = default_policy()
    assert policy.cpus == allowed_cpus() and policy.threads == len(policy.cpus)
    assert default_policy(threads=1).threads == 1


@pytest.mark.parametrize(("value", "threads"), [("1", 1), (" 3 ", 3), ("2,1", 2)])
def test_the_default_thread_count_is_the_one_omp_num_threads_asks_for(
    monkeypatch: pytest.MonkeyPatch, value: str, threads: int
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert default_policy().threads == threads
    assert default_policy(threads=5).threads == 5  # an explicit --threads wins


@pytest.mark.parametrize("value", ["0", "many", "-1"])
def test_a_bad_omp_num_threads_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    with pytest.raises(ValueError, match="OMP_NUM_THREADS"):
        default_policy()


def test_cpus_that_are_not_available_are_refused() -> None:
    with pytest.raises(ValueError, match="not available here"):
        default_policy(cpus=[max(allowed_cpus()) + 1000])


def test_the_policy_says_what_it_sets() -> None:
    policy = ThreadPolicy(threads=2, cpus=[0, 1])
    assert policy.describe() == "2 threads on CPUs 0-1"
    assert policy.environment() == dict.fromkeys(THREAD_VARIABLES, "2")
    assert policy.arguments() == ["--threads", "2", "--cpus", "0-1"]
    assert ThreadPolicy(threads=1, cpus=[3]).describe() == "1 thread on CPUs 3"
    assert os.cpu_count()  # the machine-wide count the contention flag compares with


def test_openmp_threads_wait_passively_unless_the_owner_chose() -> None:
    assert wait_environment({}) == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert wait_environment({"OMP_WAIT_POLICY": " "}) == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert wait_environment({"OMP_WAIT_POLICY": "ACTIVE"}) == {}
    assert describe_wait(wait_environment({})) == "PASSIVE"
    assert describe_wait({}) == "unset (OpenMP's default: spin, then sleep)"
