#!/bin/sh
# python.sh ARGS...: python3 with onnx and onnxruntime: the repository's .venv-test/ when
# .ci/install-python-deps.sh made one, else the python3 on PATH.
here=$(dirname "$0")
venv="$here/../../.venv-test/bin/python3"
if [ -x "$venv" ]; then exec "$venv" "$@"; fi
exec python3 "$@"
