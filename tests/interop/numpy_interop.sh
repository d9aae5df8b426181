#!/bin/sh
# numpy_interop.sh TAPEDECK: what torch.save writes, NumPy reads (.npz with numpy.load,
# .safetensors with struct + json + numpy.frombuffer, as the safetensors package does), and what
# NumPy writes back from it, torch.load reads as the original. Exit 77 (ctest: skipped) when no
# python3 with numpy is found.
set -eu
tapedeck=$1
here=$(dirname "$0")
python=""
for candidate in /usr/bin/python3 python3; do
  if "$candidate" -c "import numpy" 2>/dev/null; then python=$candidate; break; fi
done
if [ -z "$python" ]; then echo "skipped: no python3 with numpy"; exit 77; fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$tapedeck" "$here/numpy_interop.lua" save "$dir"
"$python" "$here/numpy_interop.py" "$dir"
"$tapedeck" "$here/numpy_interop.lua" check "$dir"
