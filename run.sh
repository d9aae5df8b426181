#!/usr/bin/env bash
# run.sh: install what is missing, build (only what changed), then run.
#   ./run.sh          the demo: the lecture's RNN cell, its loss, gradients and graph (build/rnn_cell.svg);
#                     with a display, also the live graph window
#   ./run.sh test     the whole test suite (Catch2, Lua scripts, REPL transcripts)
#   ./run.sh bench    the benchmark (W1-W5, µs per iteration)
set -euo pipefail
cd "$(dirname "$0")"

.ci/install-deps.sh
if [[ ! -f build/CMakeCache.txt ]]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
fi
cmake --build build -j "$(nproc)" > build/build.log 2>&1 || { tail -50 build/build.log; exit 1; }

case "${1:-demo}" in
  demo)  # with a display, the graph window stays open until closed; without one, the demo runs headless
          if [[ -n "${DISPLAY:-}" ]]; then view=(--view); else view=(); fi
          build/tapedeck "${view[@]}" scripts/rnn_cell.lua build/rnn_cell.svg ;;
  test)  ctest --test-dir build --output-on-failure -j "$(nproc)" ;;
  bench) build/tapedeck bench ;;
  *)     echo "usage: ./run.sh [demo|test|bench]" >&2; exit 2 ;;
esac
