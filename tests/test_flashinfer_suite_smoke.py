"""Smoke test of benchmarks/flashinfer_suite.py: one FlashInfer Trace definition imported, benched, exported
and loaded back; one skipped at import with its reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import SHARED_DATA, benchmark_script

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="the FlashInfer Trace dataset is not in ../shared"),
]


def test_a_definition_goes_from_import_to_flashinfer_bench(tmp_path: Path) -> None:
    with benchmark_script("flashinfer_suite") as suite:
        outcomes = suite.run_suite(SHARED_DATA, ["rmsnorm_h128", "gemm_n57344_k8192"], 1.0, 1, tmp_path)
        by_name = {o.definition: o for o in outcomes}
        assert by_name["gemm_n57344_k8192"].stage == "import" and "MiB" in by_name["gemm_n57344_k8192"].reason
        rmsnorm = by_name["rmsnorm_h128"]
        assert rmsnorm.status == "PASSED" and rmsnorm.stage == "done", rmsnorm.reason
        if rmsnorm.loaded_traces is not None:  # flashinfer-bench installed: it loaded the exported trace
            assert rmsnorm.loaded_traces == 1
        counts = suite.tally(outcomes)
        assert counts["imported"] == 1 and counts["exported"] == 1 and counts["skipped_at_import"] == 1
