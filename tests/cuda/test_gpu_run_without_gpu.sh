#!/usr/bin/env bash
# The GPU proof kit's device command (scripts/gpu_run.sh) where there is no GPU: it must fail hard,
# say why in summary.txt, and run no test (a skipped test reported as green is what it exists to
# prevent), even with the emulated GPU asked for. A kit of this build's binaries (links).
#   test_gpu_run_without_gpu.sh TAPEDECK CUDA_TESTS SOURCE_DIR
set -euo pipefail
tapedeck=$1 cuda_tests=$2 source=$3
if "$tapedeck" -e 'os.exit(torch.cuda.is_available() and 0 or 1)' 2>/dev/null; then
  echo "skipped: this machine has a GPU"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/kit/bin" "$tmp/kit/lib"
ln -s "$tapedeck" "$tmp/kit/bin/tapedeck"
ln -s "$cuda_tests" "$tmp/kit/bin/cuda_tests"
cp "$source/scripts/gpu_run.sh" "$tmp/kit/"
status=0
TAPEDECK_EMULATE_GPU=1 OUT="$tmp/out" bash "$tmp/kit/gpu_run.sh" > "$tmp/log" 2>&1 || status=$?
cat "$tmp/log"
if (( status == 0 )); then echo "FAIL: gpu_run.sh exited 0 without a GPU"; exit 1; fi
grep -q "^FAILED: " "$tmp/out/summary.txt" || { echo "FAIL: summary.txt does not say why it failed"; exit 1; }
if [[ -e "$tmp/out/cuda_tests.log" ]]; then echo "FAIL: the op rows ran without a GPU"; exit 1; fi
echo "ok: gpu_run.sh failed hard without a GPU: $(grep -m1 '^FAILED: ' "$tmp/out/summary.txt")"
