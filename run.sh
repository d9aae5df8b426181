#!/usr/bin/env bash
# run.sh: install what is missing, build (only what changed), then run.
#   ./run.sh          the demo: the lecture's RNN cell, its loss, gradients and graph (build/rnn_cell.svg);
#                     with a display, also the live graph window
#   ./run.sh test     the whole test suite (Catch2, Lua scripts, REPL transcripts); extra arguments
#                     pass through to ctest (./run.sh test -R lua.test_oracle: one test by name)
#   ./run.sh test-asan  the same suite built with clang's AddressSanitizer, LeakSanitizer and
#                     UndefinedBehaviorSanitizer (build-asan/: RelWithDebInfo, -O1 -g). Any report
#                     fails the test that caused it: a memory error, a leak at exit, undefined
#                     behaviour (it halts). Suppressions, for third-party libraries only, each
#                     explained: tests/sanitizers/. Extra ctest arguments pass through
#                     (./run.sh test-asan -R viewer).
#   ./run.sh fuzz [seconds]  the fuzzers on the sanitizer build, each for `seconds` (default 300):
#                     libFuzzer on the plan, .npy, .npz and .safetensors loaders (tests/fuzz/fuzz_*.cpp,
#                     seeded with tests/fuzz/corpus/), and the random op-sequence fuzzer through the
#                     Lua API (tests/fuzz/run_api_fuzz.sh). Findings land in build-asan/fuzz/; the
#                     exit status is 1 when any fuzzer found something.
#   ./run.sh bench    the benchmark (W1-W10, µs per iteration, beside PyTorch when installed)
#   ./run.sh notebook the lessons in Jupyter (scripts/notebooks/*.ipynb): also installs the notebook
#                     server and xeus (Debian), builds tapedeck with its Jupyter kernel, installs the
#                     kernelspec `tapedeck` for this user (~/.local/share/jupyter/kernels) and starts
#                     `jupyter notebook` on scripts/notebooks/ (with no display: --no-browser, open
#                     the URL it prints). Extra arguments pass to jupyter (./run.sh notebook --port 9000).
#   ./run.sh bench-peers  the benchmark beside its peers (`tapedeck bench --peers`):
#                     PyTorch eager, TorchScript, torch.compile, TensorFlow eager and tf.function
#                     on W1-W8 and the lecture's tf.function slide (W10); writes the table and a bar
#                     chart to bench/results/peers.md and peers.png. First installs, with pip, what
#                     python3 cannot import of torch, tensorflow-cpu and matplotlib, saying how much
#                     it downloads (torch from PyPI is the CUDA build: ~3 GB with its libraries). A
#                     Debian python3 (pip may not install into it) gets a virtualenv, build/peers-venv.
#                     Not part of CI.
set -euo pipefail
cd "$(dirname "$0")"

if [[ "${1:-demo}" == notebook ]]; then .ci/install-deps.sh notebook; else .ci/install-deps.sh; fi
case "${1:-demo}" in test|test-asan) .ci/install-python-deps.sh ;; esac   # onnx, onnxruntime: tests/onnx

# The sanitizer build: its own build directory, configured once with clang.
build_asan() {
  if [[ ! -f build-asan/CMakeCache.txt ]]; then
    CC=clang CXX=clang++ cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DTAPEDECK_SANITIZE=ON -DTAPEDECK_CUDA=OFF > /dev/null
  fi
  cmake --build build-asan -j "$(nproc)" > build-asan/build.log 2>&1 || { tail -50 build-asan/build.log; exit 1; }
}

sanitizer_env() {
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
}

test_asan() {
  build_asan
  sanitizer_env
  ctest --test-dir build-asan --output-on-failure -j "$(nproc)" "$@" && return 0
  # LeakSanitizer's own tracer sometimes crashes while it stops the threads at exit, on a loaded
  # machine ("Tracer caught signal 11 ... LeakSanitizer has encountered a fatal error":
  # google/sanitizers#1353; seen twice here, on viewer tests whose script had printed "ok"). That
  # is no finding about tapedeck, so then, and only then, the failed tests run once more, one at a
  # time: a real report fails again.
  grep -q "LeakSanitizer has encountered a fatal error" build-asan/Testing/Temporary/LastTest.log || return 1
  echo "=== test-asan: LeakSanitizer's tracer crashed (google/sanitizers#1353): the failed tests once more"
  ctest --test-dir build-asan --output-on-failure --rerun-failed "$@"
}

# Each fuzzer for $1 seconds on the sanitizer build; new inputs and findings in build-asan/fuzz/.
fuzz() {
  local seconds=${1:-300} failed=0
  build_asan
  sanitizer_env
  export ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=1"   # speed: whole stacks only matter for reading a leak
  mkdir -p build-asan/fuzz
  for name in plan_load npy_load npz_load safetensors_load; do
    echo "=== fuzz: $name, ${seconds} s (libFuzzer, seeds tests/fuzz/corpus/$name)"
    mkdir -p "build-asan/fuzz/$name"
    build-asan/tests/fuzz/fuzz_$name -dict="tests/fuzz/$name.dict" -max_total_time="$seconds" -timeout=30 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="build-asan/fuzz/$name-" \
      "build-asan/fuzz/$name" "tests/fuzz/corpus/$name" > "build-asan/fuzz/$name.log" 2>&1 || failed=1
    grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==ERROR|SUMMARY)" "build-asan/fuzz/$name.log" || true
  done
  echo "=== fuzz: the Lua API, ${seconds} s (tests/fuzz/run_api_fuzz.sh)"
  APIFUZZ_OUT="$PWD/build-asan/fuzz/api" APIFUZZ_ARGS="--strict ${APIFUZZ_ARGS:-}" \
    tests/fuzz/run_api_fuzz.sh "$PWD/build-asan/tapedeck" "$seconds" "${FUZZ_FIRST_SEED:-1}" || failed=1
  return $failed
}

# The lessons in Jupyter: the kernelspec for this user, then the notebook server on
# scripts/notebooks/ (the kernel starts in the notebook's folder, as the lessons expect). A build
# configured before xeus was installed is configured again, so that it finds xeus now.
notebook() {
  if ! build/tapedeck --install-kernel --user; then
    echo "=== notebook: configuring again, to find xeus"
    cmake -S . -B build > /dev/null
    cmake --build build -j "$(nproc)" > build/build.log 2>&1 || { tail -50 build/build.log; exit 1; }
    build/tapedeck --install-kernel --user
  fi
  local server=(jupyter notebook)
  if /usr/bin/python3 -c "import notebook" 2>/dev/null; then server=(/usr/bin/python3 -m notebook); fi
  local options=()
  if [[ -z "${DISPLAY:-}" && -z "${WAYLAND_DISPLAY:-}" ]]; then
    options+=(--no-browser)
    echo "=== notebook: no display: open the URL below (http://localhost:...?token=...) in a browser"
  fi
  if [[ $(id -u) -eq 0 ]]; then options+=(--allow-root); fi   # the notebook server refuses root without it
  exec "${server[@]}" "${options[@]}" "$@" scripts/notebooks/
}

# The peers' Python packages, as module:pip-package.
PEER_PACKAGES=(torch:torch tensorflow:tensorflow-cpu matplotlib:matplotlib)

# What pip downloads for a package: the wheels it chose for Python 3.11 on x86-64 Linux,
# dependencies included (`pip install --dry-run --ignore-installed --report`, then each wheel's
# Content-Length; PyPI, November 2026).
peer_download_size() {
  case $1 in
    torch)          echo "3.0 GB (29 wheels: torch 539 MB, the rest the CUDA libraries PyPI's torch depends on; it runs on the CPU)" ;;
    tensorflow-cpu) echo "335 MB (32 wheels: tensorflow-cpu 274 MB)" ;;
    matplotlib)     echo "42 MB (11 wheels, numpy 17 MB of them)" ;;
  esac
}

# The python3 that runs the peers: build/peers-venv's when there is one, else python3 on PATH when
# it has them all or pip may install into it; a Debian python3 is "externally managed" (PEP 668),
# so for it a virtualenv is made in build/peers-venv.
peers_python() {
  local venv=$PWD/build/peers-venv
  if [[ -x $venv/bin/python3 ]]; then echo "$venv/bin/python3"; return; fi
  if python3 -c "import torch, tensorflow, matplotlib" 2>/dev/null; then command -v python3; return; fi
  if python3 -c "import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')))"; then
    echo "=== bench-peers: this python3 is the system's (pip may not install into it): a virtualenv in $venv" >&2
    python3 -c "import ensurepip" 2>/dev/null || apt-get install -y -qq --no-install-recommends python3-venv >&2
    python3 -m venv "$venv" >&2
    echo "$venv/bin/python3"
    return
  fi
  command -v python3
}

# pip-install the peers' packages that python $1 cannot import, after saying how much that downloads.
install_peers() {
  local python=$1 missing=() entry
  for entry in "${PEER_PACKAGES[@]}"; do
    if ! "$python" -c "import ${entry%%:*}" 2>/dev/null; then
      missing+=("${entry#*:}")
      echo "=== bench-peers: ${entry#*:} is not installed: about $(peer_download_size "${entry#*:}") to download"
    fi
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "=== bench-peers: torch, tensorflow and matplotlib are installed ($python)"
    return
  fi
  echo "=== bench-peers: $python -m pip install ${missing[*]}"
  "$python" -m pip install --quiet "${missing[@]}"
}

case "${1:-demo}" in
  test-asan) shift; test_asan "$@"; exit ;;
  fuzz)      shift; fuzz "$@"; exit ;;
esac

if [[ ! -f build/CMakeCache.txt ]]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
fi
cmake --build build -j "$(nproc)" > build/build.log 2>&1 || { tail -50 build/build.log; exit 1; }

case "${1:-demo}" in
  demo)  # with a display, the graph window stays open until closed; without one, the demo runs headless
          if [[ -n "${DISPLAY:-}" ]]; then view=(--view); else view=(); fi
          build/tapedeck "${view[@]}" scripts/rnn_cell.lua build/rnn_cell.svg ;;
  test)  shift; ctest --test-dir build --output-on-failure -j "$(nproc)" "$@" ;;
  bench) build/tapedeck bench ;;
  notebook) shift; notebook "$@" ;;
  bench-peers)  # the peers' python3 first on PATH: bench/peers.lua runs the first python3 that imports each
          python=$(peers_python)
          install_peers "$python"
          PATH="$(dirname "$python"):$PATH" build/tapedeck bench --peers ;;
  *)     echo "usage: ./run.sh [demo|test|test-asan|fuzz [seconds]|bench|bench-peers|notebook]" >&2; exit 2 ;;
esac
