#!/usr/bin/env bash
# install-deps.sh: install the Debian 12 packages tapedeck builds and tests with, if missing.
# Idempotent and quick when everything is there (one dpkg-query). Needs root to install.
#   zlib1g-dev: deflate for .npz files (torch.save / torch.load).
#   libpng-dev: PNG files (torch.save_png: the spiral model's decision regions).
#   libopenblas-dev: OpenBLAS, for the matrix products where it beats Eigen (docs/performance.md);
#     found at configure time (headers, pkg-config) and loaded at run time (libopenblas0-pthread).
#     Optional: without it every product runs in Eigen.
#   libx11-dev: the viewer sets Xlib's I/O error handlers (a lost X display closes the viewer).
#   libonnx-dev, libprotobuf-dev: ONNX export (engine/io/onnx/onnx_export.h): ONNX's protobuf classes
#     (onnx.proto compiled), its checker and shape inference.
#   libcairo2-dev: headless pictures (plots of the Training window, :plot PNGs, :animate frames):
#     lines, text and PNG files without a window. libgif-dev: giflib, the GIF encoder of :animate.
#   clang, libclang-rt-14-dev: the sanitizer build (./run.sh test-asan: ASan, UBSan, LSan) and the
#     libFuzzer harnesses; llvm: llvm-symbolizer, for sanitizer reports with function names and lines.
#   chromium, chromium-driver, python3-selenium: the exported page (:export) opened in headless
#     Chromium by tests/viewer/test_page_browser.py (skipped without them).
#   xeus-dev, libzmq3-dev: the Jupyter kernel (tapedeck --kernel: xeus 2.4, its ZeroMQ server);
#     found at configure time, without them tapedeck builds with no kernel.
#   nlohmann-json3-dev: the DAP server (tapedeck --dap: the Debug Adapter Protocol's JSON); found at
#     configure time (xeus-dev brings it too), without it tapedeck builds with no DAP server.
#   python3-jupyter-client, python3-nbclient: the kernel's tests talk to it as Jupyter does, and run
#     the lesson notebooks (scripts/notebooks/) headless (tests/kernel/).
#   python3-nbconvert: `jupyter nbconvert --execute` of a lesson; python3-jupyter-kernel-test: the
#     kernel's conformance test (execute, complete, inspect, is_complete, history, display).
# With the argument `notebook` (./run.sh notebook), also what opens the lessons in a browser:
#   jupyter-notebook: the notebook server and its web page.
set -euo pipefail

packages=(
  build-essential cmake pkgconf
  libeigen3-dev libopenblas-dev
  zlib1g-dev
  libpng-dev
  libcairo2-dev libgif-dev
  liblua5.4-dev libreadline-dev
  libimgui-dev libstb-dev libglfw3-dev libgl-dev
  libgraphviz-dev graphviz
  catch2
  libx11-dev
  libonnx-dev libprotobuf-dev
  xvfb xauth libgl1-mesa-dri
  fonts-dejavu-core
  clang libclang-rt-14-dev llvm
  xeus-dev libzmq3-dev nlohmann-json3-dev
  python3-jupyter-client python3-nbclient
  python3-nbconvert python3-jupyter-kernel-test
  chromium chromium-driver python3-selenium
)
if [[ "${1:-}" == notebook ]]; then
  packages+=(jupyter-notebook)
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "install-deps: installing ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "install-deps: run as root, or install: ${missing[*]}" >&2; exit 1
  fi
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
