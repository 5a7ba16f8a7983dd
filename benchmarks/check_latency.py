"""How long ``evoteam check FILE.cu`` takes next to the nvcc compile it wraps, printed side by side.

For each CUDA file, ``--repeats`` times: (a) the bare nvcc command that ``check`` runs (shared library,
``-lineinfo -Xptxas -v``, kept PTX), timed as a subprocess; (b) ``evoteam check FILE --json`` as the language
server runs it, with an empty build cache each time (a cold check); (c) the same check again on the warm cache
(an unchanged file saved twice). Medians are printed with the overhead of (b) over (a).

It is a benchmark, not a test. Run from the repository root: ``python benchmarks/check_latency.py``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FILES = [
    REPO / "tests" / "constraints" / "wmma_gemm.cu",
    REPO / "tests" / "constraints" / "wgmma_tile.cu",
    REPO / "tests" / "constraints" / "spills.cu",
]


def _timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        sys.exit("nvcc is not on PATH")
    rows = []
    for path in FILES:
        raw, cold, warm = [], [], []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as tmp:
                work = Path(tmp)
                shutil.copy(path, work / path.name)
                (work / "keep").mkdir()
                gencode = ["-gencode", "arch=compute_90a,code=[sm_90a,compute_90a]"]
                bare = [nvcc, "-shared", "-Xcompiler", "-fPIC", *gencode, "-lineinfo", "-Xptxas", "-v", "-O3"]
                bare += ["--keep", "--keep-dir", "keep", "-o", "kernel.so", path.name]
                raw.append(_timed(bare, work))
                env = {**os.environ, "EVOTEAM_CACHE": str(work / "cache")}
                check = [sys.executable, "-m", "evoteam.cli.main", "check", str(work / path.name), "--json"]
                cold.append(_timed(check, work, env))
                warm.append(_timed(check, work, env))
        rows.append((path.name, statistics.median(raw), statistics.median(cold), statistics.median(warm)))
    print(f"{'file':<16} {'nvcc s':>8} {'check s':>8} {'overhead s':>11} {'warm check s':>13}")
    for name, r, c, w in rows:
        print(f"{name:<16} {r:8.3f} {c:8.3f} {c - r:11.3f} {w:13.3f}")
    print(f"(median of {args.repeats}; cold = empty build cache; warm = same file checked again)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
