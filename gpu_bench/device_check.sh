#!/usr/bin/env bash
# Device check: run from the repository root on a GPU machine with Python and nvcc (torch optional); about 8
# minutes at most on an H200. It compiles the CUDA examples, sets up a venv, benches them (naive vs improved,
# the pycuda variant), runs `evoteam check` and `evoteam profile`, compares our GPU timing with triton's
# do_bench, measures the improved kernel against the device's copy bandwidth and against a copy of itself,
# runs `pytest -m gpu`, the offline team on the naive kernel and the host-timing experiment (last, on what is
# left of the budget), then prints the figures. Every step has a time limit; a failed step is reported and the
# script goes on. Without a GPU it stops after the compile step and the wheel folder's check: exit 3.
#
#   OUT=DIR                   JSON results and per-step logs go here (default: a new temporary folder)
#   EVOTEAM_WHEELS=DIR        the offline wheel folder (default .device-wheels when it exists; build it with
#                             `python3 gpu_bench/wheelhouse.py build`): every install is `pip --no-index` from it, and
#                             pycuda is built from its source archive there; the wheel built is left in OUT
#   EVOTEAM_VENV=DIR          the venv to create or use (default: .venv; created with system site packages)
#   EVOTEAM_CHECK_BUDGET_S=N  total seconds for all steps (default 470)
#   CUDA_VISIBLE_DEVICES=     (set and empty) behave as on a machine without a GPU
#
# Exit status: 0 every step passed or was skipped, 1 some step failed, 3 no GPU (the compile step passed).
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 2
out=${OUT:-$(mktemp -d -t evoteam-device-check.XXXXXX)}
mkdir -p "$out/logs"
budget=${EVOTEAM_CHECK_BUDGET_S:-470}
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

pycuda_job=""
finish_pycuda_build() {  # waits for the background build of pycuda (if one runs) and records it as a step
  [ -n "$pycuda_job" ] || return 0
  wait "$pycuda_job"
  pycuda_job=""
  local rc status
  rc=$(cat "$out/logs/build-pycuda.rc" 2>/dev/null || echo 1)
  case $rc in
    0) status=ok ;;
    124 | 137) status="TIMEOUT after 300s" ;;
    *) status="FAILED (exit $rc)" ;;
  esac
  record build-pycuda "$status" $((SECONDS - pycuda_t0))
  if [ "$status" = ok ]; then
    echo "== build-pycuda: ok; kept for the next run (copy it into the wheel folder): $(cd "$out" && ls pycuda-*.whl)"
  else
    echo "== build-pycuda: $status; last lines of logs/build-pycuda.log:"
    tail -n 15 "$out/logs/build-pycuda.log" | sed 's/^/   | /'
  fi
}

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

# ---- 1. the CUDA examples compile (no GPU needed) -------------------------------------------------------------------
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

# ---- 2. the offline wheel folder is complete for this Python (no GPU needed) ----------------------------------------
wheels=${EVOTEAM_WHEELS:-}
[ -z "$wheels" ] && [ -d "$repo/.device-wheels" ] && wheels=$repo/.device-wheels
if [ -n "$wheels" ]; then
  wheels=$(cd "$wheels" 2>/dev/null && pwd) || { echo "EVOTEAM_WHEELS: no folder at ${EVOTEAM_WHEELS}"; exit 2; }
  host_python=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  step wheels 60 python3 "$repo/gpu_bench/wheelhouse.py" check "$wheels" --python "$host_python"
  show wheels
fi

# ---- 3. is there a GPU? ---------------------------------------------------------------------------------------------
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
    echo "device check: a step failed (a CUDA example's compile or the wheel folder, see above);" \
      "and no GPU here ($gpu_reason)"
    exit 1
  fi
  passed="the CUDA examples compile${wheels:+, the wheel folder is complete}"
  echo "device check: no GPU on this machine ($gpu_reason): $passed; the GPU steps did not run"
  exit 3
fi
step nvidia-smi 30 nvidia-smi
show nvidia-smi

# ---- 4. the environment: a venv with torch (CUDA), evoteam[device-check], pycuda ------------------------------------
venv=${EVOTEAM_VENV:-.venv}
case $venv in /*) ;; *) venv=$repo/$venv ;; esac
pip_opts=(--disable-pip-version-check --retries 1 --timeout 20)
[ -n "$wheels" ] && pip_opts+=(--no-index --find-links "$wheels")
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
  if [ -n "$wheels" ]; then  # offline: build evoteam with the venv's setuptools (the folder holds a recent one)
    step install-build-tools 60 "$py" -m pip install "${pip_opts[@]}" "setuptools>=68" wheel
    step install-evoteam 180 "$py" -m pip install "${pip_opts[@]}" --no-build-isolation -e ".[device-check]"
  else
    step install-evoteam 240 "$py" -m pip install "${pip_opts[@]}" -e ".[device-check]"
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
if ! "$py" -c 'import pycuda.driver' >/dev/null 2>&1; then
  tag=$("$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  if [ -z "$wheels" ]; then
    step install-pycuda 300 "$py" -m pip install "${pip_opts[@]}" pycuda
  elif compgen -G "$wheels/pycuda-*-$tag-*.whl" >/dev/null; then  # a wheel an earlier check built and kept
    step install-pycuda 60 "$py" -m pip install "${pip_opts[@]}" pycuda
  else
    cuda_root=${CUDA_HOME:-/usr/local/cuda}
    nvcc_root=$(dirname "$(dirname "${nvcc:-/}")")
    [ -f "$nvcc_root/include/cuda.h" ] && cuda_root=$nvcc_root
    echo "== build-pycuda (limit 300s; in the background while the CUDA examples are benched)"
    pycuda_t0=$SECONDS
    (
      timeout -k 10 300 bash "$repo/gpu_bench/build_pycuda.sh" "$py" "$wheels" "$out" "$cuda_root" \
        >"$out/logs/build-pycuda.log" 2>&1
      echo $? >"$out/logs/build-pycuda.rc"
    ) &
    pycuda_job=$!
  fi
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

# ---- 5. bench, check, profile, compare with do_bench, roofline, identical kernels, pycuda, GPU tests, team ------
cd "$repo/examples/rmsnorm" || exit 2
bench() { STEP_STDOUT="$out/bench_$1.json" step "bench-$1" 150 "${evoteam[@]}" bench "$1" --json --max-time 1; }
bench rmsnorm_cuda_naive
bench rmsnorm_cuda
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
STEP_SKIP_RC=3 step roofline 150 "$py" -m evoteam.gpu_bench.device_compare roofline --json "$out/roofline.json"
show roofline
step identical 120 "$py" benchmarks/self_consistency.py --kernels rmsnorm_cuda --burners 0 --max-time 0.3 \
  --json "$out/identical.json"
tail -n 4 "$out/logs/identical.log" | sed 's/^/   /'
finish_pycuda_build
cd "$repo/examples/rmsnorm" || exit 2
bench rmsnorm_pycuda
cd "$repo" || exit 2
step pytest-gpu 240 "$py" -m pytest -m gpu -q -p no:cacheprovider --junitxml "$out/pytest-gpu.xml"
tail -n 5 "$out/logs/pytest-gpu.log" | sed 's/^/   /'
step offline-team 200 "$py" -m evoteam.gpu_bench.device_compare offline-team --json "$out/evolve.json"
tail -n 3 "$out/logs/offline-team.log" | sed 's/^/   /'
# last, on what is left of the budget: can a kernel be timed from outside the process that launches it (issue 21)
STEP_SKIP_RC=3 step host-timing 90 "$py" benchmarks/gpu_host_timing.py --json "$out/host_timing.json"
tail -n 6 "$out/logs/host-timing.log" | sed 's/^/   /'

# ---- 6. figures -----------------------------------------------------------------------------------------------------
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
