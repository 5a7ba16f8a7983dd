"""``evoteam bench`` as a user runs it: JSON output, traces on disk, the example task, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA, REPO, kernel_solution
from evoteam.gpu_bench.schema import Solution, Trace

pytestmark = pytest.mark.integration

QUICK = ["--max-time", "0.05", "--flush", "none"]


def evoteam(*args: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evoteam.cli.main", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def write_solution(tmp_path: Path, solution: Solution) -> Path:
    path = tmp_path / f"{solution.name}.json"
    path.write_text(solution.to_json())
    return path


def files(tmp_path: Path, kernel: str = "honest.cpp") -> list[str | Path]:
    return [
        "--definition", DATA / "scale_add.json",
        "--workloads", DATA / "scale_add.jsonl",
        "--solution", write_solution(tmp_path, kernel_solution(kernel)),
    ]  # fmt: skip


def test_json_output_has_status_summary_and_flashinfer_traces(tmp_path: Path) -> None:
    proc = evoteam("bench", *files(tmp_path), "--json", *QUICK)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["status"] == "PASSED"
    summary = payload["summary"]
    assert {"geomean_speedup", "mean_speedup", "faster", "total", "worst"} <= set(summary)
    assert summary["total"] == 3 and summary["geomean_speedup"] > 0
    traces = [Trace.model_validate(t) for t in payload["traces"]]
    assert [t.workload.uuid for t in traces] == ["small-1000", "medium-4096", "large-65536"]
    for t in traces:
        assert t.evaluation is not None and t.evaluation.performance is not None
        perf = t.evaluation.performance
        assert perf.speedup_factor == pytest.approx(perf.reference_latency_ms / perf.latency_ms, rel=1e-6)
    for w in payload["workloads"]:  # paired timing: the speedup's interval, the pairs, and the flags it earned
        lo, hi = w["ci"]
        assert 0 < lo <= w["speedup"] <= hi
        assert w["pairs"] >= 3 and isinstance(w["flags"], list)
    lo, hi = summary["geomean_ci"]
    assert 0 < lo <= hi
    # progress goes to stderr as plain lines (not a terminal here), phase by phase
    assert "] baseline " in proc.stderr and "] candidate honest" in proc.stderr


def test_failing_candidate_exits_1_and_table_names_the_failure(tmp_path: Path) -> None:
    proc = evoteam("bench", *files(tmp_path, "partial_write.cpp"), *QUICK)
    assert proc.returncode == 1, proc.stderr
    assert "INCORRECT_NUMERICAL" in proc.stdout
    assert "non-finite" in proc.stdout


def test_emit_traces_writes_the_flashinfer_dataset_layout(tmp_path: Path) -> None:
    out = tmp_path / "dataset"
    proc = evoteam("bench", *files(tmp_path), "--emit-traces", out, *QUICK)
    assert proc.returncode == 0, proc.stderr
    assert (out / "definitions" / "elementwise" / "scale_add_f32.json").is_file()
    solution = json.loads((out / "solutions" / "elementwise" / "scale_add_f32" / "honest.json").read_text())
    assert "compile_flags" not in solution["spec"]
    workloads = (out / "workloads" / "elementwise" / "scale_add_f32.jsonl").read_text().splitlines()
    assert len(workloads) == 3
    traces = (out / "traces" / "elementwise" / "scale_add_f32.jsonl").read_text().splitlines()
    assert [Trace.model_validate_json(line).evaluation.status.value for line in traces] == ["PASSED"] * 3  # type: ignore[union-attr]
    # the c-binding candidate is written as flashinfer-bench calls it: through a generated tvm-ffi entry point
    assert solution["spec"]["binding"] == "tvm-ffi" and len(solution["sources"]) == 2
    fib = pytest.importorskip("flashinfer_bench.data", reason="flashinfer-bench is not installed")
    loaded = fib.TraceSet.from_path(str(out))  # flashinfer-bench's own models load it
    assert [t.evaluation.status.value for t in loaded.traces["scale_add_f32"]] == ["PASSED"] * 3
    assert loaded.solutions["scale_add_f32"][0].spec.binding.value == "tvm-ffi"
    py_out = tmp_path / "python"
    python = evoteam("bench", *files(tmp_path, "honest.py"), "--emit-traces", py_out, *QUICK)
    assert python.returncode == 0, python.stderr
    (written,) = fib.TraceSet.from_path(str(py_out)).solutions["scale_add_f32"]
    assert written.spec.language.value == "python" and written.spec.binding is None  # no python binding


def test_emit_traces_refuses_what_flashinfer_bench_cannot_load_before_running(tmp_path: Path) -> None:
    data = json.loads((DATA / "scale_add.json").read_text())
    data["outputs"]["out"]["dtype"] = "float64"  # not a flashinfer-bench dtype
    wide = tmp_path / "wide.json"
    wide.write_text(json.dumps(data))
    args = files(tmp_path)
    args[1] = wide
    proc = evoteam("bench", *args, "--emit-traces", tmp_path / "out", *QUICK)
    _one_error_line(proc, "--emit-traces: scale_add_f32 has tensors of dtypes flashinfer-bench lacks: out (float64)")
    assert "] baseline " not in proc.stderr and not (tmp_path / "out").exists()


def test_bench_kernel_from_the_example_evoteam_toml(tmp_path: Path) -> None:
    example = REPO / "examples" / "rmsnorm"
    subset = tmp_path / "two.jsonl"
    subset.write_text("\n".join((example / "workloads" / "rmsnorm_h4096.jsonl").read_text().splitlines()[:2]))
    proc = evoteam("bench", "rmsnorm_tuned", "--workloads", subset, "--json", *QUICK, cwd=example)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["status"] == "PASSED"
    assert payload["summary"]["total"] == 2
    assert all(t["solution"] == "rmsnorm_tuned" for t in payload["traces"])


def _one_error_line(proc: subprocess.CompletedProcess[str], phrase: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    progress = "evoteam bench ["  # the plain progress lines come before it
    lines = [line for line in proc.stderr.strip().splitlines() if not line.startswith(progress)]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("evoteam bench: error:")
    assert phrase in lines[0]


def test_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    args = files(tmp_path)
    args[1] = tmp_path / "nope.json"
    _one_error_line(evoteam("bench", *args), "definition file not found")


def test_invalid_json_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    args = files(tmp_path)
    args[5] = bad
    _one_error_line(evoteam("bench", *args), "is not valid JSON")


def test_definition_whose_reference_does_not_run_is_one_clear_error(tmp_path: Path) -> None:
    data = json.loads((DATA / "scale_add.json").read_text())
    data["reference"] = "def run(x, y):\n    raise RuntimeError('broken reference')\n"
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(data))
    args = files(tmp_path)
    args[1] = broken
    _one_error_line(evoteam("bench", *args, *QUICK), "broken reference")


def test_a_candidate_that_does_not_load_is_a_compile_error_also_in_json(tmp_path: Path) -> None:
    solution = kernel_solution("honest.cpp", symbol="no_such_kernel")
    args = files(tmp_path)
    args[5] = write_solution(tmp_path, solution)
    proc = evoteam("bench", *args, *QUICK)
    assert proc.returncode == 1, proc.stderr
    assert "COMPILE_ERROR" in proc.stdout and "'no_such_kernel' is not exported" in proc.stdout
    proc = evoteam("bench", *args, *QUICK, "--json")
    assert proc.returncode == 1, proc.stderr
    payload = json.loads(proc.stdout)  # one JSON object, nothing else on stdout
    assert payload["status"] == "COMPILE_ERROR" and "'no_such_kernel' is not exported" in payload["error"]
    assert {t["evaluation"]["status"] for t in payload["traces"]} == {"COMPILE_ERROR"}


def test_json_prints_one_object_for_bad_input_too(tmp_path: Path) -> None:
    args = files(tmp_path)
    args[1] = tmp_path / "missing.json"
    proc = evoteam("bench", *args, *QUICK, "--json")
    assert proc.returncode == 2
    payload = json.loads(proc.stdout)
    assert payload["status"] == "ERROR" and "definition file not found" in payload["error"]
    assert proc.stderr.strip().splitlines()[-1].startswith("evoteam bench: error:")


def test_unknown_kernel_name_lists_the_known_ones() -> None:
    proc = evoteam("bench", "nope", cwd=REPO / "examples" / "rmsnorm")
    _one_error_line(proc, "rmsnorm_tuned")


def test_missing_safetensors_blob_names_it(tmp_path: Path) -> None:
    lines = (DATA / "scale_add.jsonl").read_text().splitlines()
    trace = json.loads(lines[0])
    trace["workload"]["inputs"]["x"] = {
        "type": "safetensors",
        "path": "blob/x.safetensors",
        "tensor_key": "x",
    }
    workloads = tmp_path / "blob.jsonl"
    workloads.write_text(json.dumps(trace))
    args = files(tmp_path)
    args[3] = workloads
    _one_error_line(evoteam("bench", *args, *QUICK), "blob/x.safetensors")
