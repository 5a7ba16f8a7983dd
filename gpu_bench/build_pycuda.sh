#!/usr/bin/env bash
# Builds pycuda's wheel offline from its source archive in a wheel folder, against this machine's CUDA toolkit,
# into OUT_DIR, and installs it from there. The device check runs it when the folder holds no pycuda wheel for
# this Python: pycuda publishes none, and its build needs the CUDA headers and the driver library. Keep the wheel
# it leaves in OUT_DIR (copy it into the folder) and the next check installs it without building.
#
#   build_pycuda.sh PYTHON WHEEL_FOLDER OUT_DIR CUDA_ROOT
set -euo pipefail
py=$1 wheels=$2 out=$3 root=$4
sdist=$(find "$wheels" -maxdepth 1 -name 'pycuda-*.tar.gz' | sort -V | tail -n 1)
if [ -z "$sdist" ]; then
  echo "build_pycuda: no pycuda source archive (pycuda-*.tar.gz) in $wheels" \
    "(python3 gpu_bench/wheelhouse.py build fetches it)" >&2
  exit 1
fi
if [ ! -f "$root/include/cuda.h" ]; then
  echo "build_pycuda: no CUDA toolkit at $root (no include/cuda.h)" >&2
  exit 1
fi
src=$(mktemp -d -t evoteam-pycuda.XXXXXX)
trap 'rm -rf "$src"' EXIT
# pycuda links -lcuda: the toolkit's stub library, else the driver's own library through a link of that name
libdir=""
for dir in "$root/lib64/stubs" "$root/lib/stubs" "$root/targets/x86_64-linux/lib/stubs" "$root/lib64" "$root/lib"; do
  if [ -e "$dir/libcuda.so" ]; then libdir=$dir; break; fi
done
if [ -z "$libdir" ]; then
  driver=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')
  for folder in /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64; do
    if [ -z "$driver" ] && [ -e "$folder/libcuda.so.1" ]; then driver=$folder/libcuda.so.1; fi
  done
  if [ -z "$driver" ]; then
    echo "build_pycuda: no libcuda.so (the CUDA driver library) in $root's lib folders, nor libcuda.so.1 on this" \
      "machine" >&2
    exit 1
  fi
  libdir=$src/libcuda
  mkdir -p "$libdir"
  ln -s "$driver" "$libdir/libcuda.so"
fi
tar xzf "$sdist" -C "$src"
cd "$src"/pycuda-*
options=(--cuda-root="$root" --cudadrv-lib-dir="$libdir")
# curand's wrapper needs its header; a toolkit without it still gives the driver API that evoteam uses.
[ -f "$root/include/curand.h" ] || options+=(--no-cuda-enable-curand)
echo "build_pycuda: $(basename "$sdist") against $root (${options[*]})"
"$py" configure.py "${options[@]}"
"$py" -m pip wheel --disable-pip-version-check --no-index --find-links "$wheels" --no-deps --no-build-isolation \
  -w "$out" .
"$py" -m pip install --disable-pip-version-check --no-index --find-links "$out" --find-links "$wheels" pycuda
ls "$out"/pycuda-*.whl
