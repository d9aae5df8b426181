#!/usr/bin/env bash
# run.sh: install what is missing, build (only what changed), then run.
#   ./run.sh          the demo: the lecture's RNN cell, its loss, gradients and graph (build/rnn_cell.svg);
#                     with a display, also the live graph window
#   ./run.sh test     the whole test suite (Catch2, Lua scripts, REPL transcripts)
#   ./run.sh test-asan  the same suite built with clang's AddressSanitizer, LeakSanitizer and
#                     UndefinedBehaviorSanitizer (build-asan/: RelWithDebInfo, -O1 -g). Any report
#                     fails the test that caused it: a memory error, a leak at exit, undefined
#                     behaviour (it halts). Suppressions, for third-party libraries only, each
#                     explained: tests/sanitizers/. Extra ctest arguments pass through
#                     (./run.sh test-asan -R viewer).
#   ./run.sh bench    the benchmark (W1-W5, µs per iteration)
set -euo pipefail
cd "$(dirname "$0")"

.ci/install-deps.sh

# The sanitizer suite: its own build directory, configured once with clang.
test_asan() {
  if [[ ! -f build-asan/CMakeCache.txt ]]; then
    CC=clang CXX=clang++ cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DTAPEDECK_SANITIZE=ON > /dev/null
  fi
  cmake --build build-asan -j "$(nproc)" > build-asan/build.log 2>&1 || { tail -50 build-asan/build.log; exit 1; }
  # detect_leaks: LeakSanitizer at every exit. fast_unwind_on_malloc=0: whole allocation stacks,
  # also through libraries built without frame pointers (fontconfig, Graphviz), so reports are
  # readable and suppressions can name the library (the viewer's window tests turn it back on:
  # tests/viewer/CMakeLists.txt says why). exitcode 66: a report is told apart from a script that
  # fails on purpose (exit 1). check_initialization_order: static initialisers reading globals of
  # another file before they are made. Options already in the environment come last and win.
  export ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0:exitcode=66:check_initialization_order=1:${ASAN_OPTIONS:-}"
  export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=66:${UBSAN_OPTIONS:-}"
  # Stacks with function names and lines: llvm-symbolizer (Debian's `llvm`, or llvm-14's own).
  if [[ -z "${ASAN_SYMBOLIZER_PATH:-}" ]]; then
    for symbolizer in "$(command -v llvm-symbolizer || true)" /usr/bin/llvm-symbolizer-14; do
      if [[ -x "$symbolizer" ]]; then export ASAN_SYMBOLIZER_PATH=$symbolizer; break; fi
    done
  fi
  ctest --test-dir build-asan --output-on-failure -j "$(nproc)" "$@"
}

if [[ "${1:-demo}" == test-asan ]]; then
  shift
  test_asan "$@"
  exit
fi

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
  *)     echo "usage: ./run.sh [demo|test|test-asan|bench]" >&2; exit 2 ;;
esac
