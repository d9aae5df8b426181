#!/usr/bin/env bash
# gpu_run.sh: the one device command of the GPU proof kit (scripts/gpu_check.sh --prepare copies it
# into the kit; the device tool runs `bash .gpu-kit/gpu_run.sh`). It builds and installs nothing and
# keeps to its own time limits (TAPEDECK_GPU_BUDGET seconds in all, default 540). In order:
#
#   1. probe      the driver and GPU (nvidia-smi), CUDA's libraries (the toolkit's, else PyTorch's
#                 wheels), every library the binaries load; fails hard unless tapedeck names a GPU
#   2. op rows    cuda_tests with TAPEDECK_REQUIRE_GPU=1 (no GPU is a failure, not a skip)
#   3. blocking   only if 2 failed: again with CUDA_LAUNCH_BLOCKING=1, to name the first kernel
#                 that faulted (after an asynchronous fault every later call fails alike)
#   4. models     the four models eager and frozen (captured as CUDA graphs, launched) against the CPU
#   5. memcheck   compute-sanitizer on our own kernels' rows (cuBLAS and cuDNN rows left out)
#   6. bench      tapedeck bench --device cuda beside PyTorch CUDA, with the time that is left
#
# Everything goes to $OUT (the device tool's folder; else the first argument, else ./gpu-out):
# summary.txt (the figures a note needs), probe.txt, cuda_tests.log, cuda_tests_blocking.log,
# models.log, memcheck.log, bench_cuda.txt: seven files, each cut to 15 MB (the tool takes 8 of 16).
# Exit status: 0 when every stage that ran passed.
set -uo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-${1:-./gpu-out}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
budget=${TAPEDECK_GPU_BUDGET:-540}
status=0
summary=$out/summary.txt
: > "$summary"

say() { echo "$*" | tee -a "$summary"; }
left() { echo $((budget - SECONDS)); }
finish() {
  for f in "$out"/*; do [[ $(stat -c %s "$f") -gt 15000000 ]] && truncate -s 15000000 "$f"; done
  say "gpu_run: done in ${SECONDS}s, status $status"
  exit "$status"
}
fail_hard() { say "FAILED: $*"; status=1; finish; }
# timed SECONDS LOG COMMAND...: run with a time limit, output to LOG; its exit status (124: timed out).
timed() {
  local limit=$1 log=$2
  shift 2
  timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1
}

unset TAPEDECK_EMULATE_GPU TAPEDECK_TEST_DEVICE
export PYTHONUNBUFFERED=1
# The driver's and the toolkit's programs (nvidia-smi, compute-sanitizer) where a bare PATH lacks them.
for d in /usr/local/nvidia/bin /usr/local/cuda/bin; do [[ -d "$d" ]] && PATH="$PATH:$d"; done

# --- 1. probe ------------------------------------------------------------------------------------
{
  echo "== nvidia-smi"
  nvidia-smi --query-gpu=name,driver_version,mig.mode.current,memory.total --format=csv 2>&1 || echo "(nvidia-smi failed)"
  echo "== host CPU"
  grep -m1 "model name" /proc/cpuinfo
  grep -m1 -o "avx2" /proc/cpuinfo || echo "no avx2: the kit's -march=x86-64-v3 binaries cannot run here"
} > "$out/probe.txt" 2>&1
say "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo 'nvidia-smi failed')"

# CUDA's libraries: the toolkit's first (and the driver's folder, where a container mounts it),
# then each lib/ folder of PyTorch's nvidia wheels.
cuda_dirs=()
for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
  [[ -d "$d" ]] && cuda_dirs+=("$d")
done
while read -r d; do [[ -n "$d" ]] && cuda_dirs+=("$d"); done < <(python3 - 2>/dev/null <<'EOF'
import glob, os
try:
    import nvidia
    for root in nvidia.__path__:
        for lib in sorted(glob.glob(os.path.join(root, "*", "lib"))):
            print(lib)
except Exception:
    pass
EOF
)
# (The kit's own libraries come by the binaries' RPATH, $ORIGIN/../lib: the library path holds
# CUDA's folders only, so the Python the benchmark starts loads none of Debian 12's libraries.)
library_path=""
for d in "${cuda_dirs[@]}"; do library_path+="${library_path:+:}$d"; done
export LD_LIBRARY_PATH="$library_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  echo "== library path"
  tr ':' '\n' <<< "$LD_LIBRARY_PATH"
  echo "== CUDA's libraries"
  for so in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9; do
    found=""
    for d in "${cuda_dirs[@]}"; do [[ -e "$d/$so" ]] && { found="$d/$so"; break; }; done
    echo "$so: ${found:-MISSING}"
  done
  echo "== PyTorch"
  python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version())' 2>&1
  echo "== ldd"
  ldd "$kit/bin/tapedeck" "$kit/bin/cuda_tests" 2>&1 | tee "$out/ldd.tmp"
  echo "== tapedeck -v"
  "$kit/bin/tapedeck" -v 2>&1
} >> "$out/probe.txt"
missing=$(grep -E "MISSING$" "$out/probe.txt" | cut -d: -f1 | tr '\n' ' ')
[[ -z "$missing" ]] || fail_hard "CUDA's libraries not found: $missing(looked in: ${cuda_dirs[*]:-nowhere}); probe.txt"
not_found=$(grep "not found" "$out/ldd.tmp" | awk '{print $1}' | sort -u | tr '\n' ' ')
rm -f "$out/ldd.tmp"
[[ -z "$not_found" ]] || fail_hard "the binaries need libraries the loader cannot find: $not_found(probe.txt)"
grep '^CUDA: ' "$out/probe.txt" | tee -a "$summary"
gpu_line=$(grep '^GPU: ' "$out/probe.txt")
device=$("$kit/bin/tapedeck" -e 'if torch.cuda.is_available() then print(torch.cuda.get_device_name()) else print("none: " .. torch.cuda.why_unavailable()) end' 2>&1)
[[ -n "$device" && "$device" != none:* && "$device" != *emulated* ]] || fail_hard "tapedeck names no GPU: ${device:-$gpu_line}"
say "tapedeck's GPU: $device"

# --- 2. the op rows -------------------------------------------------------------------------------
TAPEDECK_REQUIRE_GPU=1 timed 200 "$out/cuda_tests.log" "$kit/bin/cuda_tests"
rows=$?
say "cuda_tests: exit $rows$( ((rows == 124)) && echo ' (timed out after 200 s)')"
grep -E "^op rows on |^test cases:|^assertions:|^All tests passed" "$out/cuda_tests.log" | tee -a "$summary"
if (( rows != 0 )); then
  status=1
  grep -m3 -E "CUDA error|cuBLAS error|cuDNN error" "$out/cuda_tests.log" | sed 's/^/  first errors: /' | tee -a "$summary"
  # --- 3. after a failure: synchronous launches name the kernel that faulted
  CUDA_LAUNCH_BLOCKING=1 TAPEDECK_REQUIRE_GPU=1 timed 120 "$out/cuda_tests_blocking.log" "$kit/bin/cuda_tests"
  say "cuda_tests with CUDA_LAUNCH_BLOCKING=1: exit $?"
  grep -m3 -E "CUDA error|cuBLAS error|cuDNN error|FAILED" "$out/cuda_tests_blocking.log" | sed 's/^/  /' | tee -a "$summary"
fi

# --- 4. the models ------------------------------------------------------------------------------
TAPEDECK_REQUIRE_GPU=1 timed 150 "$out/models.log" "$kit/bin/tapedeck" "$kit/src/tests/cuda/test_cuda_models.lua"
models=$?
say "models (eager and frozen on the GPU against the CPU): exit $models"
grep -E "largest difference|^ok$" "$out/models.log" | sed 's/^/  /' | tee -a "$summary"
(( models == 0 )) || { status=1; tail -5 "$out/models.log" | sed 's/^/  /' | tee -a "$summary"; }

# --- 5. compute-sanitizer on our kernels ---------------------------------------------------------
if ! command -v compute-sanitizer > /dev/null; then
  say "memcheck: skipped (no compute-sanitizer on the PATH)"
elif (( $(left) < 150 )); then
  say "memcheck: skipped ($(left) s left)"
else
  limit=$(( $(left) - 110 ))
  (( limit > 240 )) && limit=240
  TAPEDECK_REQUIRE_GPU=1 TAPEDECK_TEST_OUR_KERNELS=1 timed "$limit" "$out/memcheck.log" \
    compute-sanitizer --tool memcheck --error-exitcode 3 "$kit/bin/cuda_tests" "every op row*"
  check=$?
  say "memcheck on our kernels' op rows: exit $check$( ((check == 124)) && echo " (timed out after $limit s)")"
  grep -E "ERROR SUMMARY" "$out/memcheck.log" | tail -1 | sed 's/^/  /' | tee -a "$summary"
  (( check == 0 || check == 124 )) || status=1
fi

# --- 6. the benchmark, with the time that is left -------------------------------------------------
if (( $(left) < 60 )); then
  say "bench: skipped ($(left) s left)"
else
  (cd "$kit/src/bench" && timed $(( $(left) - 15 )) "$out/bench_cuda.txt" "$kit/bin/tapedeck" bench.lua --device cuda \
    ${TAPEDECK_BENCH_WORKLOADS:-W2 W3 W4 W8})
  say "bench --device cuda: exit $?"
  grep -E "^W[0-9]" "$out/bench_cuda.txt" | sed 's/^/  /' | tee -a "$summary"
fi
finish
