#!/usr/bin/env bash
# gpu_check.sh: the GPU proof kit. The GPU machine has a driver, CUDA 13's libraries and PyTorch but
# none of tapedeck's Debian packages and no package registry, and a session gets ~15 minutes of it
# in all: so everything is built here, on the CPU machine, and the device only runs.
#
#   scripts/gpu_check.sh --prepare [DIR]   build the kit into DIR (default .gpu-kit, git-ignored)
#   scripts/gpu_check.sh --dry-run [DIR]   prove it here: the binaries start from a clean folder with
#                                          only the kit on the library path, and DIR/gpu_run.sh,
#                                          with no GPU, fails hard, naming why
#
# The kit (docs/cuda.md, "The GPU proof"):
#   DIR/bin/tapedeck, DIR/bin/cuda_tests  built for sm_90 (H100/H200) and a portable CPU level
#                                         (-march=x86-64-v3: AVX2, not this machine's AVX-512)
#   DIR/lib/                              every shared library they load that a bare Debian 12
#                                         lacks, except CUDA's own (runtime, cuBLAS, cuDNN: the
#                                         GPU machine's toolkit and wheels give those; cuBLASLt and
#                                         cuDNN's engines are hundreds of MB)
#   DIR/src/                              the Lua the device runs: the models test, the model
#                                         scripts, the benchmark
#   DIR/gpu_run.sh                        the one device command (scripts/gpu_run.sh)
#   DIR/MANIFEST.txt                      the commit, the build's flags, each file's size
#
# On the device (the device tool, one call, then give_back):
#   run(command: "bash .gpu-kit/gpu_run.sh", carry: [".gpu-kit"], timeout_s: 600)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

mode=${1:-}
kit=${2:-.gpu-kit}
KIT_LIMIT_MB=60   # the device tool carries 64 MiB with the working tree

# The libraries a bare Debian 12 has (libc's family and the C++ runtime) and those the GPU machine
# gives (CUDA's): the kit carries every other library the binaries load.
CUDA_PATH_HERE=/usr/local/cuda/lib64:/usr/local/cuda/lib   # CUDA's libraries on this machine
BASE_LIBS='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so'
CUDA_LIBS='^(libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*)\.so'

# "name path" for each library `ldd` resolves for the files given (LD_LIBRARY_PATH as set).
resolved_libraries() {
  ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u
}

prepare() {
  local build=${TAPEDECK_KIT_BUILD:-build-gpu-kit}
  command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || { echo "gpu_check: nvcc not found: the kit needs the CUDA toolkit here" >&2; exit 1; }
  local launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  mkdir -p "$build"
  echo "gpu_check: configuring $build (CUDA for sm_90, -march=${TAPEDECK_KIT_MARCH:-x86-64-v3}, no viewer)"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTAPEDECK_CUDA=ON -DTAPEDECK_VIEWER=OFF \
    -DTAPEDECK_MARCH="${TAPEDECK_KIT_MARCH:-x86-64-v3}" -DCMAKE_CUDA_ARCHITECTURES="${TAPEDECK_KIT_CUDA_ARCH:-90-real}" \
    -DCMAKE_SKIP_BUILD_RPATH=OFF '-DCMAKE_BUILD_RPATH=$ORIGIN/../lib' -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags \
    "${launcher[@]}" > "$build/kit-configure.log" 2>&1 \
    || { tail -30 "$build/kit-configure.log"; exit 1; }
  grep -q "CUDA: on" "$build/kit-configure.log" || { grep "CUDA" "$build/kit-configure.log"; echo "gpu_check: CUDA is off in $build" >&2; exit 1; }
  echo "gpu_check: building tapedeck and cuda_tests"
  ninja -C "$build" tapedeck cuda_tests > "$build/kit-build.log" 2>&1 || { tail -40 "$build/kit-build.log"; exit 1; }

  rm -rf "$kit"
  mkdir -p "$kit/bin" "$kit/lib" "$kit/src/tests/cuda" "$kit/src/scripts/models" "$kit/src/bench"
  cp "$build/tapedeck" "$build/tests/cuda/cuda_tests" "$kit/bin/"
  strip "$kit/bin/tapedeck" "$kit/bin/cuda_tests"
  # RPATH (not RUNPATH: it holds for the libraries' own needs too) $ORIGIN/../lib: the binaries
  # find the kit's libraries with no LD_LIBRARY_PATH, which the device keeps for CUDA's folders
  # (a Python started beside them must not load Debian 12's libraries).
  readelf -d "$kit/bin/tapedeck" | grep -q 'RPATH.*\$ORIGIN/../lib' \
    || { echo "gpu_check: $kit/bin/tapedeck has no RPATH \$ORIGIN/../lib" >&2; exit 1; }
  local name path
  while read -r name path; do
    [[ "$name" =~ $BASE_LIBS || "$name" =~ $CUDA_LIBS ]] && continue
    cp -L "$path" "$kit/lib/$name"
  done < <(LD_LIBRARY_PATH=$CUDA_PATH_HERE resolved_libraries "$kit/bin/tapedeck" "$kit/bin/cuda_tests")
  cp tests/cuda/test_cuda_models.lua "$kit/src/tests/cuda/"
  cp scripts/models/*.lua "$kit/src/scripts/models/"
  cp bench/*.lua bench/*.py "$kit/src/bench/"
  cp scripts/gpu_run.sh "$kit/gpu_run.sh"
  {
    echo "tapedeck GPU proof kit, made $(date -u +%Y-%m-%dT%H:%M:%SZ) by scripts/gpu_check.sh --prepare"
    echo "commit: $(git rev-parse HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "build: Release, -march=${TAPEDECK_KIT_MARCH:-x86-64-v3}, CUDA architectures ${TAPEDECK_KIT_CUDA_ARCH:-90-real}, $(nvcc --version 2>/dev/null | tail -1 || /usr/local/cuda/bin/nvcc --version | tail -1)"
    echo "the GPU machine gives: libcudart.so.13, libcublas.so.13, libcublasLt.so.13, libcudnn.so.9 (cuDNN 9 for CUDA 13)"
    echo "not carried (not loaded at start; the proof does not use them): OpenBLAS (dlopen'd when there, 36 MB: CPU"
    echo "products run in Eigen), Graphviz's layout plugins (:graph's layout), fonts"
    echo
    (cd "$kit" && find . -type f ! -name MANIFEST.txt -printf '%10s  %p\n' | sort -k2)
  } > "$kit/MANIFEST.txt"
  local mb
  mb=$(du -sm "$kit" | cut -f1)
  echo "gpu_check: kit in $kit: $(du -sh "$kit" | cut -f1) ($(ls "$kit/lib" | wc -l) libraries; binaries $(du -ch "$kit"/bin/* | tail -1 | cut -f1))"
  (( mb <= KIT_LIMIT_MB )) || { echo "gpu_check: the kit is $mb MB, over $KIT_LIMIT_MB MB: the device tool cannot carry it" >&2; exit 1; }
}

# Every library a kit binary resolves comes from the kit, the base system or CUDA's own.
check_libraries_from_kit() {
  local dir=$1 name path bad=0
  while read -r name path; do
    path=$(realpath "$path")   # bin/../lib/x as lib/x
    if [[ "$path" == "$dir/lib/"* || "$name" =~ $BASE_LIBS || "$name" =~ $CUDA_LIBS ]]; then continue; fi
    echo "dry run: $name is loaded from $path, not from the kit"
    bad=1
  done < <(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$CUDA_PATH_HERE" bash -c "$(declare -f resolved_libraries); resolved_libraries '$dir/bin/tapedeck' '$dir/bin/cuda_tests'")
  if env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$CUDA_PATH_HERE" ldd "$dir/bin/tapedeck" "$dir/bin/cuda_tests" | grep "not found"; then bad=1; fi
  return $bad
}

dry_run() {
  [[ -x "$kit/bin/tapedeck" ]] || { echo "gpu_check: no kit in $kit (run --prepare first)" >&2; exit 1; }
  local clean
  clean=$(mktemp -d /tmp/gpu-kit-dry-run.XXXXXX)
  cp -r "$kit" "$clean/kit"
  cd "$clean"   # no build tree, no checkout: only the kit
  local dir=$clean/kit
  local run=(env -i PATH=/usr/bin:/bin HOME="$clean" LD_LIBRARY_PATH="$CUDA_PATH_HERE")
  echo "dry run: in $clean: the kit's libraries by its RPATH, CUDA's from $CUDA_PATH_HERE, nothing else"
  check_libraries_from_kit "$dir" || { echo "dry run: FAILED (a library does not come from the kit)"; exit 1; }
  echo "dry run: every library comes from the kit, the base system or CUDA"
  "${run[@]}" "$dir/bin/tapedeck" -v
  "${run[@]}" "$dir/bin/tapedeck" -e '
    torch.manual_seed(0)
    local model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    local x, y = torch.randn(16, 4), torch.randn(16, 1)
    local step = torch.freeze{function(a, b) return F.mse_loss(model(a), b) end, x, y}
    local eager = F.mse_loss(model(x), y):item()
    assert(math.abs(step(x, y):item() - eager) < 1e-6, "frozen and eager agree")
    print(("dry run: tapedeck runs a model eager and frozen from the kit (loss %.4f)"):format(eager))'
  echo "dry run: cuda_tests and the models test on the emulated GPU (the binaries and the kit's Lua, not CUDA)"
  "${run[@]}" TAPEDECK_EMULATE_GPU=1 "$dir/bin/cuda_tests" | tail -4
  "${run[@]}" TAPEDECK_EMULATE_GPU=1 "$dir/bin/tapedeck" "$dir/src/tests/cuda/test_cuda_models.lua" | tail -2
  echo "dry run: the device command, here without a GPU, must fail hard and say why"
  local status=0
  "${run[@]}" OUT="$clean/out" bash "$dir/gpu_run.sh" > "$clean/gpu_run.txt" 2>&1 || status=$?
  cat "$clean/gpu_run.txt"
  if (( status == 0 )); then echo "dry run: FAILED (gpu_run.sh passed without a GPU)"; exit 1; fi
  grep -q "^FAILED: " "$clean/out/summary.txt" || { echo "dry run: FAILED (the summary does not say why)"; exit 1; }
  echo "dry run: passed (gpu_run.sh exited $status: $(grep -m1 '^FAILED: ' "$clean/out/summary.txt"))"
  rm -rf "$clean"
}

case "$mode" in
  --prepare) prepare ;;
  --dry-run) dry_run ;;
  *) echo "usage: scripts/gpu_check.sh --prepare [DIR] | --dry-run [DIR]   (DIR: .gpu-kit)" >&2; exit 2 ;;
esac
