"""``evoteam bench --dataset``: every solution of a FlashInfer Trace dataset on every workload, against the
reference, with traces that flashinfer-bench loads; FIB_DATASET_PATH as the default folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA, REPO, kernel_solution
from evoteam.gpu_bench.interop.flashinfer.export import to_flashinfer_solution
from evoteam.gpu_bench.task import load_definition

pytestmark = pytest.mark.integration
QUICK = ["--max-time", "0.05", "--flush", "none"]


def dataset(root: Path) -> Path:
    """A dataset of scale_add_f32: its three workloads plus one over any small cap and one whose blob is
    missing; solutions: an honest one, a wrong one and one that does not parse."""
    definition = load_definition(DATA / "scale_add.json")
    (root / "definitions" / "elementwise").mkdir(parents=True)
    shutil.copy(DATA / "scale_add.json", root / "definitions" / "elementwise" / "scale_add_f32.json")
    lines = (DATA / "scale_add.jsonl").read_text().splitlines()
    huge = json.loads(lines[0])
    huge["workload"].update(uuid="huge", axes={"n": 1 << 24})
    blob = json.loads(lines[0])
    blob["workload"].update(uuid="blob")
    blob["workload"]["inputs"]["x"] = {"type": "safetensors", "path": "blob/missing.safetensors", "tensor_key": "x"}
    (root / "workloads" / "elementwise").mkdir(parents=True)
    (root / "workloads" / "elementwise" / "scale_add_f32.jsonl").write_text(
        "\n".join([*lines, json.dumps(huge), json.dumps(blob)]) + "\n"
    )
    solutions = root / "solutions" / "elementwise" / "scale_add_f32"
    solutions.mkdir(parents=True)
    for kernel in ("honest.py", "wrong_shape.py"):
        fib = to_flashinfer_solution(kernel_solution(kernel), definition)
        (solutions / f"{fib.name}.json").write_text(json.dumps(fib.to_json_dict()))
    (solutions / "broken.json").write_text("{not json")
    return root


def bench(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evoteam.cli.main", "bench", *map(str, args)],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip


def test_every_solution_on_every_workload_with_one_line_per_workload_left_out(tmp_path: Path) -> None:
    root = dataset(tmp_path / "fib")
    proc = bench("--dataset", root, "--max-mb", "16", "--json", *QUICK)
    assert proc.returncode == 1, proc.stderr  # the wrong solution fails
    payload = json.loads(proc.stdout)
    results = {r["solution"]: r for r in payload["results"]}
    assert results["honest"]["status"] == "PASSED" and results["honest"]["summary"]["total"] == 3
    assert results["wrong_shape"]["status"] == "INCORRECT_SHAPE"
    left_out = payload["left_out"]
    assert any(line.startswith("solution solutions/elementwise/scale_add_f32/broken.json:") for line in left_out)
    assert "workload huge of scale_add_f32 (n=16777216): 192.0 MiB of tensors, over the 16 MiB cap" in left_out
    assert "workload blob of scale_add_f32 (n=1000): its safetensors blob blob/missing.safetensors is missing" in (
        left_out
    )
    summary = payload["summary"]
    assert summary["solutions"] == 2 and summary["passed"] == 1 and summary["workloads"] == 6
    assert summary["fast_p"]["fast_0"] == 0.5
    # traces appended to the dataset, as flashinfer-bench run leaves them; its own models load them
    fib = pytest.importorskip("flashinfer_bench.data", reason="flashinfer-bench is not installed")
    (root / "solutions" / "elementwise" / "scale_add_f32" / "broken.json").unlink()  # flashinfer-bench refuses it
    traces = fib.TraceSet.from_path(str(root)).traces["scale_add_f32"]
    assert sorted(t.evaluation.status.value for t in traces) == ["INCORRECT_SHAPE"] * 3 + ["PASSED"] * 3


def test_the_folder_defaults_to_fib_dataset_path_and_a_bad_one_is_one_error(tmp_path: Path) -> None:
    root = dataset(tmp_path / "fib")
    env = {**os.environ, "FIB_DATASET_PATH": str(root)}
    proc = bench("--dataset", "--only", "scale_*", "--max-mb", "16", *QUICK, env=env)
    assert proc.returncode == 1, proc.stderr
    assert "scale_add_f32  honest  PASSED  geomean" in proc.stdout
    assert f"traces in {root / 'traces'}" in proc.stdout
    proc = bench("--dataset", tmp_path / "nothing", "--json")
    assert proc.returncode == 2
    assert "is not a FlashInfer Trace dataset" in json.loads(proc.stdout)["error"]
    proc = bench("--dataset", root, "--only", "gemm_*")
    assert proc.returncode == 2 and "no definition matches 'gemm_*'" in proc.stderr
