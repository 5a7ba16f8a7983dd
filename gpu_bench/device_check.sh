#!/usr/bin/env bash
# Device check: run from the repository root on a GPU machine with Python and nvcc (torch optional); about 8
# minutes at most on an H200. It compiles the CUDA examples, sets up a venv, benches them (naive vs improved,
# the pycuda variant), compares our GPU timing with triton's do_bench, runs `pytest -m gpu`, `evoteam check`
# and `evoteam profile`, then prints one figures table. Every step has a time limit; a failed step is
# reported and the script goes on. Without a GPU it stops after the compile step: exit 3.
#
#   OUT=DIR                   JSON results and per-step logs go here (default: a new temporary folder)
#   EVOTEAM_WHEELS=DIR        prebuilt wheels (pycuda, torch, ...) for pip install --find-links
#   EVOTEAM_VENV=DIR          the venv to create or use (default: .venv; created with system site packages)
#   EVOTEAM_CHECK_BUDGET_S=N  total seconds for all steps (default 460)
#   CUDA_VISIBLE_DEVICES=     (set and empty) behave as on a machine without a GPU
#
# Exit status: 0 every step passed or was skipped, 1 some step failed, 3 no GPU (the compile step passed).
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 2
out=${OUT:-$(mktemp -d -t evoteam-device-check.XXXXXX)}
mkdir -p "$out/logs"
budget=${EVOTEAM_CHECK_BUDGET_S:-460}
start=$SECONDS
results=()  # "name|status|seconds"
failed=0

remaining() { echo $((budget - (SECONDS - start))); }

record() {  # name status seconds
  results+=("$1|$2|$3")
  case "$2" in ok | skipped*) ;; *) failed=1 ;; esac
}

# step NAME LIMIT_S CMD...: runs CMD (stdout+stderr into logs/NAME.log), prints the log's tail on failure.
# STEP_STDOUT=FILE sends stdout to FILE instead (for --json output).
step() {
  local name=$1 limit=$2 left t0 rc status log="$out/logs/$1.log"
  shift 2
  left=$(remaining)
  if ((left < 15)); then
    echo "== $name: skipped (time budget spent)"
    record "$name" "skipped (no time left)" 0
    return 0
  fi
  ((limit > left)) && limit=$left
  echo "== $name (limit ${limit}s)"
  t0=$SECONDS
  if [ -n "${STEP_STDOUT:-}" ]; then
    timeout -k 10 "$limit" "$@" >"$STEP_STDOUT" 2>"$log"
  else
    timeout -k 10 "$limit" "$@" >"$log" 2>&1
  fi
  rc=$?
  case $rc in
    0) status=ok ;;
    124 | 137) status="TIMEOUT after ${limit}s" ;;
    *) status="FAILED (exit $rc)" ;;
  esac
  if [ "${STEP_SKIP_RC:-}" = "$rc" ]; then status="skipped (see log)"; fi
  record "$name" "$status" $((SECONDS - t0))
  if [ "$status" != ok ] && [ "${status#skipped}" = "$status" ]; then
    echo "   $status; last lines of logs/$name.log:"
    tail -n 15 "$log" | sed 's/^/   | /'
  fi
  return 0
}

show() { sed 's/^/   /' "$out/logs/$1.log"; }

summary() {
  echo
  echo "== steps ($((SECONDS - start)) s in all; logs and JSON in $out)"
  local row
  for row in "${results[@]}"; do
    IFS='|' read -r n s t <<<"$row"
    printf '   %-28s %-34s %4ss\n' "$n" "$s" "$t"
  done
}

find_tool() {  # the first of: on PATH, $CUDA_HOME/bin, /usr/local/cuda/bin
  command -v "$1" 2>/dev/null && return 0
  local dir
  for dir in "${CUDA_HOME:-}/bin" /usr/local/cuda/bin; do
    [ -x "$dir/$1" ] && { echo "$dir/$1"; return 0; }
  done
  return 1
}

echo "device check of $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo 'this tree') on $(hostname) at $(date -u +%FT%TZ)"

# ---- 1. the CUDA examples compile (no GPU needed) ---------------------------------------------------------------
examples=examples/rmsnorm/kernels
build_dir=$(mktemp -d -t evoteam-cuda-examples.XXXXXX)
trap 'rm -rf "$build_dir"' EXIT
if nvcc=$(find_tool nvcc); then
  echo "nvcc: $nvcc ($("$nvcc" --version | tail -n 1))"
  for kernel in rmsnorm_cuda_naive rmsnorm_cuda; do
    step "compile-$kernel" 180 "$nvcc" -arch=sm_90a -lineinfo -Xptxas -v -O3 -shared -Xcompiler -fPIC \
      -o "$build_dir/$kernel.so" "$examples/$kernel.cu"
  done
  step compile-rmsnorm_pycuda 180 "$nvcc" -arch=sm_90a -lineinfo -Xptxas -v -O3 -cubin \
    -o "$build_dir/rmsnorm_pycuda.cubin" "$examples/rmsnorm_pycuda.cu"
  grep -h -E "Compiling entry function|Used [0-9]+ registers|spill" "$out"/logs/compile-*.log | sed 's/^/   /'
else
  echo "nvcc: not found (PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin)"
  record compile "skipped (nvcc not found)" 0
fi

# ---- 2. is there a GPU? ----------------------------------------------------------------------------------------------
gpu_reason=""
if [ "${CUDA_VISIBLE_DEVICES+set}" = set ] && { [ -z "$CUDA_VISIBLE_DEVICES" ] || [ "$CUDA_VISIBLE_DEVICES" = -1 ]; }; then
  gpu_reason="CUDA_VISIBLE_DEVICES is set to '${CUDA_VISIBLE_DEVICES}', which hides every GPU"
elif ! smi=$(command -v nvidia-smi); then
  gpu_reason="nvidia-smi is not installed"
elif ! timeout 30 "$smi" -L 2>/dev/null | grep -q '^GPU '; then
  gpu_reason="nvidia-smi lists no GPU"
fi
if [ -n "$gpu_reason" ]; then
  summary
  if ((failed)); then
    echo "device check: a CUDA example did not compile (see above); and no GPU here ($gpu_reason)"
    exit 1
  fi
  echo "device check: no GPU on this machine ($gpu_reason): the CUDA examples compile; the GPU steps did not run"
  exit 3
fi
step nvidia-smi 30 nvidia-smi
show nvidia-smi

# ---- 3. the environment: a venv with torch (CUDA), evoteam[dev,gpu] ------------------------------------------------
venv=${EVOTEAM_VENV:-.venv}
case $venv in /*) ;; *) venv=$repo/$venv ;; esac
pip_opts=(--disable-pip-version-check --retries 1 --timeout 20)
[ -n "${EVOTEAM_WHEELS:-}" ] && pip_opts+=(--find-links "$EVOTEAM_WHEELS")
if [ ! -x "$venv/bin/python" ]; then
  step venv 60 python3 -m venv --system-site-packages "$venv"
fi
py=$venv/bin/python
if [ ! -x "$py" ]; then
  py=$(command -v python3)
  echo "   no venv at $venv: using $py"
fi
if ! "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  if "$py" -c 'import torch' >/dev/null 2>&1; then
    step install-torch 300 "$py" -m pip install "${pip_opts[@]}" --force-reinstall torch  # a CPU-only build
  else
    step install-torch 300 "$py" -m pip install "${pip_opts[@]}" torch
  fi
fi
if "$py" - "$repo" >/dev/null 2>&1 <<'EOF'
import sys
from pathlib import Path

import evoteam.gpu_bench.profile.ncu as p
import pytest  # noqa: F401

sys.exit(0 if Path(p.__file__).resolve().is_relative_to(Path(sys.argv[1]).resolve()) else 1)
EOF
then
  echo "== evoteam: already installed from this tree"
else
  step install-evoteam 240 "$py" -m pip install "${pip_opts[@]}" -e ".[dev,gpu]"
  if ! "$py" -c 'import evoteam.gpu_bench.profile.ncu, pytest' >/dev/null 2>&1; then
    step install-evoteam-dev 180 "$py" -m pip install "${pip_opts[@]}" -e ".[dev]"
  fi
  if ! "$py" -c 'import evoteam.gpu_bench.profile.ncu' >/dev/null 2>&1; then
    step install-evoteam-offline 120 "$py" -m pip install "${pip_opts[@]}" --no-build-isolation --no-deps -e .
  fi
  if ! "$py" -c 'import evoteam.gpu_bench.profile.ncu' >/dev/null 2>&1; then
    # not installable here: import it from a tree of links (the installed layout), as scripts/typecheck does
    links=$(mktemp -d -t evoteam-links.XXXXXX)
    mkdir -p "$links/evoteam"
    for part in cli gpu_bench roles supervisor server; do ln -s "$repo/$part" "$links/evoteam/$part"; done
    export PYTHONPATH="$links${PYTHONPATH:+:$PYTHONPATH}"
    echo "   evoteam is not installed: importing it through $links"
  fi
fi
if ! "$py" -c 'import pycuda' >/dev/null 2>&1; then
  step install-pycuda 180 "$py" -m pip install "${pip_opts[@]}" pycuda
fi
"$py" - <<'EOF' 2>&1 | sed 's/^/   /'
import importlib

for name in ("torch", "triton", "pycuda", "evoteam.gpu_bench"):
    try:
        module = importlib.import_module(name)
        print(f"{name}: {getattr(module, '__version__', 'installed')}")
    except Exception as exc:
        print(f"{name}: missing ({type(exc).__name__}: {exc})")
import torch

if torch.cuda.is_available():
    print(f"GPU: {torch.cuda.get_device_name()} (torch CUDA {torch.version.cuda})")
EOF
evoteam=("$py" -m evoteam.cli.main)

# ---- 4. bench the CUDA examples, compare timings, GPU tests, check, profile -----------------------------------------
cd "$repo/examples/rmsnorm" || exit 2
for kernel in rmsnorm_cuda_naive rmsnorm_cuda rmsnorm_pycuda; do
  STEP_STDOUT="$out/bench_$kernel.json" step "bench-$kernel" 150 "${evoteam[@]}" bench "$kernel" --json --max-time 1
done
step check 90 "${evoteam[@]}" check kernels/rmsnorm_cuda.cu
show check
if ncu=$(find_tool ncu); then
  EVOTEAM_NCU=$ncu STEP_STDOUT="$out/profile_rmsnorm_cuda.json" step profile 180 "${evoteam[@]}" profile rmsnorm_cuda --json
  [ -s "$out/profile_rmsnorm_cuda.json" ] && "$py" - "$out/profile_rmsnorm_cuda.json" <<'EOF' 2>&1 | sed 's/^/   /'
import sys
from pathlib import Path

from evoteam.gpu_bench.profile.ncu import ProfileReport

report = ProfileReport.model_validate_json(Path(sys.argv[1]).read_text())
for k in report.kernels:
    sol, occ = k.speed_of_light, k.occupancy
    print(f"{k.name[:60]}: {k.duration_us} us, SM {sol.sm_throughput_pct}%, DRAM {sol.dram_throughput_pct}%, "
          f"occupancy {occ.achieved_pct}% of {occ.theoretical_pct}%")
print(report.error or "")
EOF
else
  echo "== profile: skipped (ncu not found on PATH, in \$CUDA_HOME/bin or /usr/local/cuda/bin)"
  record profile "skipped (no ncu)" 0
fi
cd "$repo" || exit 2
STEP_SKIP_RC=3 step compare 120 "$py" -m evoteam.gpu_bench.device_compare compare --json "$out/compare.json"
show compare
step pytest-gpu 240 "$py" -m pytest -m gpu -q -p no:cacheprovider
tail -n 5 "$out/logs/pytest-gpu.log" | sed 's/^/   /'

# ---- 5. figures ------------------------------------------------------------------------------------------------------
echo
echo "== figures"
"$py" -m evoteam.gpu_bench.device_compare table "$out" | sed 's/^/   /'
summary
if ((failed)); then
  echo "device check: some steps failed (see above)"
  exit 1
fi
echo "device check: every step passed or was skipped"
exit 0
