#!/usr/bin/env bash
# gpu_check.sh: build tapedeck with CUDA on a GPU machine that has the CUDA toolkit, CMake and a
# Python with PyTorch, but none of tapedeck's Debian -dev packages and no package registry; then
# run the CUDA tests and the GPU benchmark, and write their output under OUT_DIR.
#
#   scripts/gpu_check.sh OUT_DIR [DEB_DIR]
#
# TAPEDECK_GPU_STAGES picks what runs (default "build tests memcheck bench"; the device tool
# allows 10 minutes a command, so a session may run "build tests" first, then "memcheck" and
# "bench": the build directory stays on the warm machine between calls).
#
# DEB_DIR (default .gpu-debs, git-ignored) holds the Debian 12 packages the build needs, fetched
# beforehand on a machine that has apt (scripts/gpu_check.sh --fetch does it there). They are
# unpacked with dpkg -x into a prefix, and pkg-config, CMake and the loader are pointed at it.
# cuDNN comes from the toolkit, or from the pip wheel PyTorch ships (nvidia-cudnn-cu13).
# docs/cuda.md says more.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(libeigen3-dev liblua5.4-dev liblua5.4-0 libreadline-dev libreadline8 libncurses-dev libtinfo6
          libncurses6 libncursesw6 catch2 libpng-dev libpng16-16 zlib1g-dev pkgconf pkgconf-bin libpkgconf3
          libgraphviz-dev libgvc6 libcgraph6 libcdt5 libpathplan4 libxdot4 libltdl7 libgvpr2 liblab-gamut1 libexpat1)

if [[ "${1:-}" == "--fetch" ]]; then   # on a Debian 12 machine with apt: fill DEB_DIR
  debs=${2:-.gpu-debs}
  mkdir -p "$debs"
  (cd "$debs" && apt-get download "${PACKAGES[@]}")
  echo "gpu_check: $(ls "$debs" | wc -l) packages in $debs ($(du -sh "$debs" | cut -f1))"
  exit 0
fi

out=${1:?usage: scripts/gpu_check.sh OUT_DIR [DEB_DIR]   (or --fetch [DEB_DIR])}
debs=${2:-.gpu-debs}
mkdir -p "$out"
out=$(cd "$out" && pwd)
log() { echo "=== gpu_check: $*" | tee -a "$out/gpu_check.log"; }

prefix=${TAPEDECK_PREFIX:-/tmp/tapedeck-prefix}
mkdir -p "$prefix"
for f in "$debs"/*.deb; do dpkg -x "$f" "$prefix"; done
multiarch=usr/lib/x86_64-linux-gnu
export PKG_CONFIG_LIBDIR="$prefix/$multiarch/pkgconfig:$prefix/usr/share/pkgconfig:$prefix/usr/lib/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$prefix"
export LD_LIBRARY_PATH="$prefix/$multiarch:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
command -v pkg-config >/dev/null || export PATH="$prefix/usr/bin:$PATH"

# cuDNN: the toolkit's, else the wheel's (its library is libcudnn.so.9, headers beside it).
if [[ -z "${CUDNN_ROOT:-}" && ! -f /usr/local/cuda/include/cudnn.h ]]; then
  CUDNN_ROOT=$(python3 -c 'import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))' 2>/dev/null || true)
  [[ -n "$CUDNN_ROOT" ]] && export CUDNN_ROOT LD_LIBRARY_PATH="$CUDNN_ROOT/lib:$LD_LIBRARY_PATH"
fi
log "nvidia-smi: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"
log "cuDNN: ${CUDNN_ROOT:-/usr/local/cuda}"

build=${TAPEDECK_GPU_BUILD:-build-gpu}
stages=" ${TAPEDECK_GPU_STAGES:-build tests memcheck bench} "
wants() { [[ "$stages" == *" $1 "* ]]; }
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if wants build; then
  log "configure ($build)"
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DTAPEDECK_VIEWER=OFF -DTAPEDECK_BLAS=OFF \
    -DCMAKE_PREFIX_PATH="$prefix/usr" -DCMAKE_CUDA_ARCHITECTURES="${TAPEDECK_CUDA_ARCHITECTURES:-90-real;75-virtual}" \
    > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
  log "build"
  cmake --build "$build" -j "$(nproc)" > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
fi

status=0
if wants tests; then
  log "tapedeck -v and --ops"
  "$build/tapedeck" -v | tee -a "$out/gpu_check.log"
  "$build/tapedeck" --ops > "$out/ops.txt"; tail -1 "$out/ops.txt" | tee -a "$out/gpu_check.log"
  log "the CUDA tests (ctest -R cuda), and the op table on the CPU"
  ctest --test-dir "$build" -R "^cuda\.|op table" --output-on-failure > "$out/cuda_tests.log" 2>&1 || status=1
  tail -15 "$out/cuda_tests.log" | tee -a "$out/gpu_check.log"
fi
if wants memcheck && command -v compute-sanitizer >/dev/null; then   # out-of-bounds and uninitialised reads in our kernels
  log "compute-sanitizer memcheck on the op rows (cuda_tests)"
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 "$build/tests/cuda/cuda_tests" \
    > "$out/memcheck.log" 2>&1 || status=1
  tail -5 "$out/memcheck.log" | tee -a "$out/gpu_check.log"
fi
if wants bench; then
  log "the GPU benchmark (tapedeck bench --device cuda)"
  "$build/tapedeck" bench --device cuda ${TAPEDECK_BENCH_WORKLOADS:-W2 W3 W4 W5 W6 W7 W8} > "$out/bench_cuda.txt" 2>&1 || status=1
  tee -a "$out/gpu_check.log" < "$out/bench_cuda.txt"
fi
log "done (status $status)"
exit $status
