"""Smoke test of benchmarks/kernelbench_suite.py: two sample problems measured against themselves, and one
refused at import, counted as such."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import TESTS, benchmark_script
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.timing.statistics import TimingConfig
from evoteam.gpu_bench.worker.evaluate import EvalConfig

pytestmark = pytest.mark.integration

QUICK = EvalConfig(timing=TimingConfig(warmup_s=0.005, min_samples=5, max_samples=40, max_time_s=0.1))


def test_problems_are_imported_small_and_measured_against_themselves(tmp_path: Path, runner: LocalRunner) -> None:
    with benchmark_script("kernelbench_suite") as suite:
        files = suite.problems(TESTS / "kernelbench")
        assert [f.name for f in files][:2] == [
            "1_Square_matrix_multiplication_.py",
            "15_Matmul_for_lower_triangular_matrices.py",
        ]
        matmul = suite.measure(files[0], tmp_path / "tasks", runner, 1.0, QUICK)
        assert matmul.stage == "evaluate" and matmul.status == "PASSED", matmul.reason
        assert matmul.scale is not None and matmul.scale < 1  # 4096 x 4096 floats do not fit 1 MiB
        assert matmul.ci is not None and matmul.ci[0] <= matmul.speedup <= matmul.ci[1]
        broken = tmp_path / "3_broken.py"
        broken.write_text("import torch\n\n\nclass Model(torch.nn.Module):\n    pass\n")
        refused = suite.measure(broken, tmp_path / "tasks", runner, 1.0, QUICK)
        assert refused.stage == "import" and "defines no get_inputs" in refused.reason
        counts = suite.tally([matmul, refused])
        assert counts["problems"] == 2 and counts["imported"] == 1 and counts["refused_at_import"] == 1
        assert counts["passed"] == 1 and counts["ties"] == int(matmul.tie)
