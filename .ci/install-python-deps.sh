#!/usr/bin/env bash
# install-python-deps.sh: the Python packages the test suite needs, if missing: onnx and onnxruntime
# (the ONNX export's checks, tests/onnx/). Idempotent and quick when present (one import).
# With python3's own pip when it has one (pip install as root), else (Debian's python3, which
# refuses pip installs: PEP 668) in a virtual environment .venv-test/, which tests/onnx/python.sh
# then uses. About 25 MB to download.
set -euo pipefail
cd "$(dirname "$0")/.."

has_packages() { "$1" -c "import onnx, onnxruntime" 2>/dev/null; }

if has_packages python3 || { [[ -x .venv-test/bin/python3 ]] && has_packages .venv-test/bin/python3; }; then
  exit 0
fi
echo "install-python-deps: installing onnx and onnxruntime with pip (about 25 MB)"
if python3 -m pip install -q onnx onnxruntime 2>/dev/null && has_packages python3; then
  exit 0
fi
if ! python3 -m venv .venv-test 2>/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv python3-pip
  python3 -m venv .venv-test
fi
.venv-test/bin/pip install -q onnx onnxruntime
has_packages .venv-test/bin/python3
