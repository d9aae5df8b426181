#!/usr/bin/env bash
# run_api_fuzz.sh: the Lua API fuzzer (api_fuzz.lua) seed after seed for a time budget, each seed in
# its own tapedeck process under `timeout`. A seed whose process crashed, hung, printed a sanitizer
# report (ASan, UBSan, LeakSanitizer) or an oracle finding is a finding: its log (a runnable
# reproducer: `tapedeck LOG </dev/null`) and its stderr are kept in crashes/.
#
#   tests/fuzz/run_api_fuzz.sh TAPEDECK_BINARY SECONDS [FIRST_SEED]
#
#   TAPEDECK_BINARY  the tapedeck to test (a sanitizer build finds the most)
#   SECONDS          wall-time budget for all seeds together
#   FIRST_SEED       seeds run FIRST_SEED, FIRST_SEED+1, ... (default 1)
#
# Optional environment:
#   APIFUZZ_CALLS         calls per seed (default 3000)
#   APIFUZZ_SEED_SECONDS  wall seconds per seed at most (default 60)
#   APIFUZZ_HANG_SECONDS  seconds past that before a seed counts as hung (default 30); a run may
#                         so last SECONDS + APIFUZZ_HANG_SECONDS when its last seed hangs
#   APIFUZZ_ARGS          more api_fuzz.lua arguments, e.g. "--avoid tape_gc,softmax_empty --gc stress --strict"
#   APIFUZZ_GC_STRESS     every Nth seed runs with --gc stress (default 4; 0: never)
#   APIFUZZ_OUT           output directory (default build/apifuzz under the repository): crashes/,
#                         report.tsv (offending error messages of all seeds), last run's files
#   ASAN_OPTIONS, UBSAN_OPTIONS, LSAN_OPTIONS are passed on; the script adds
#   max_allocation_size_mb=2048 and allocator_may_return_null=1 to ASAN_OPTIONS (no single
#   allocation above 2 GiB), LSAN_OPTIONS=suppressions=tests/sanitizers/lsan.supp (third-party
#   leaks only) when LSAN_OPTIONS names no suppressions, and runs a binary without ASan under
#   `ulimit -v` 8 GiB.
#
# Output: one line per finding (seed, what, the report's first line, the saved log), then totals:
# seeds, calls (a crashed or hung seed counts its calls up to the one that stopped it), errors and
# the share that name the function / carry the user's file:line / are one line, and the most
# frequent offending messages. Exit status: 0 no finding, 1 findings, 2 usage.
set -uo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  sed -n '2,30p' "$0" >&2
  exit 2
fi
binary=$1
budget=$2
seed=${3:-1}
here=$(cd "$(dirname "$0")" && pwd)
fuzzer=$here/api_fuzz.lua
calls=${APIFUZZ_CALLS:-3000}
seed_seconds=${APIFUZZ_SEED_SECONDS:-60}
hang_seconds=${APIFUZZ_HANG_SECONDS:-30}
stress_every=${APIFUZZ_GC_STRESS:-4}
out=${APIFUZZ_OUT:-$here/../../build/apifuzz}
read -r -a extra <<< "${APIFUZZ_ARGS:-}"

if [[ ! -x $binary ]]; then echo "run_api_fuzz: $binary is not an executable" >&2; exit 2; fi
if ! [[ $budget =~ ^[0-9]+$ && $seed =~ ^[0-9]+$ ]]; then echo "run_api_fuzz: SECONDS and FIRST_SEED are whole numbers" >&2; exit 2; fi
mkdir -p "$out/crashes"
work=$(mktemp -d "${TMPDIR:-/tmp}/apifuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
report=$out/report.tsv
: > "$report"

export ASAN_OPTIONS="max_allocation_size_mb=2048:allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
# Third-party leaks (fontconfig and Graphviz, each explained there) unless the caller chose suppressions.
suppressions=$here/../sanitizers/lsan.supp
if [[ -f $suppressions && ${LSAN_OPTIONS:-} != *suppressions=* ]]; then
  export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$suppressions")" && pwd)/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
fi
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
limit_memory=0   # a binary without ASan runs under ulimit -v (ASan reserves terabytes of address space)
if ! grep -q __asan_init "$binary"; then limit_memory=1; fi

start=$SECONDS
seeds=0 total_calls=0 findings=0 errors=0 named=0 located=0 oneline=0
sanitizer_pattern='ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|SUMMARY: (Address|Undefined|Leak)Sanitizer|AddressSanitizer:DEADLYSIGNAL'
declare -A signature_count signature_seed

# A short name for the finding in the stderr file $1 (the same bug gives the same name): the
# sanitizer's kind and the first frame in tapedeck's own code, or the failed assertion.
signature_of() {
  local err=$1 frame line where message
  if grep -aq 'runtime error:' "$err"; then
    line=$(grep -a -m1 'runtime error:' "$err")
    where=$(sed -E 's#^.*/([^/: ]+:[0-9]+):[0-9]+: runtime error: .*#\1#' <<< "$line")
    message=$(sed -E -e 's#^.*: runtime error: ##' -e 's/-?[0-9][0-9.e+]*|-?nan|-?inf/N/g' <<< "$line" | cut -c1-80)
    echo "UBSan at $where: $message"
  elif grep -aq 'ERROR: AddressSanitizer' "$err"; then
    frame=$(grep -a -A60 'ERROR: AddressSanitizer' "$err" | grep -a -m1 -E ' in .* /[^ ]*/(engine|lua_bindings|repl|viewer)/' |
            sed -E 's/^ *#[0-9]+ 0x[0-9a-f]+ in ([^(]*).* \/[^ ]*\/([^/ ]+)$/\1 (\2)/')
    echo "ASan $(grep -a -m1 'ERROR: AddressSanitizer' "$err" | sed -E 's/.*AddressSanitizer: ([a-zA-Z-]+).*/\1/') in ${frame:-?}"
  elif grep -aq 'ERROR: LeakSanitizer' "$err"; then
    frame=$(grep -a -A12 'Direct leak\|Indirect leak' "$err" | grep -a -m1 -E ' in .* /[^ ]*/(engine|lua_bindings|repl|viewer)/|\(/[^)]*\.so' |
            sed -E 's/^ *#[0-9]+ 0x[0-9a-f]+ (in )?([^(]*).*\/([^/ )]+)\)?.*$/\2 (\3)/')
    echo "LeakSanitizer: ${frame:-?}"
  elif grep -aq 'Assertion .* failed' "$err"; then
    grep -a -m1 'Assertion .* failed' "$err" | sed -E 's#^[^:]*: ([^:]*/)?([^/:]+:[0-9]+): .*(Assertion `[^`]{0,60}).*#assertion at \2: \3#'
  else
    echo "$2"
  fi
}

# Whether the only report in $work/err is a leak that the suppressions cover once the stacks are
# whole. ./run.sh fuzz unwinds fast for speed, which cuts an allocation's stack at the first library
# built without frame pointers (Graphviz's gmalloc), so a known third-party leak (lsan.supp names
# the library that allocated) can go unmatched: the seed's log is replayed with whole stacks, and
# the leak counts only when it is still reported then.
leak_suppressed_with_whole_stacks() {
  grep -aqE 'ERROR: AddressSanitizer|runtime error:|AddressSanitizer:DEADLYSIGNAL' "$work/err" && return 1
  grep -aq 'ERROR: LeakSanitizer' "$work/err" || return 1
  ( cd "$work" && ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0" exec timeout -k 10 $(( seed_seconds + hang_seconds )) \
      "$binary" "$log" < /dev/null > /dev/null 2> "$work/err_whole_stacks" )
  ! grep -aqE "$sanitizer_pattern" "$work/err_whole_stacks"
}

while (( SECONDS - start < budget )); do
  left=$(( budget - (SECONDS - start) ))
  (( left < 3 )) && break
  this_seconds=$(( left < seed_seconds ? left : seed_seconds ))
  gc=()
  if (( stress_every > 0 && seed % stress_every == 0 )); then gc=(--gc stress); fi
  log=$work/seed_$seed.lua
  {
    (
      ulimit -c 0
      if (( limit_memory )); then ulimit -v 8388608; fi
      cd "$work" && exec timeout -k 10 $(( this_seconds + hang_seconds )) "$binary" "$fuzzer" --seed "$seed" --calls "$calls" \
        --seconds "$this_seconds" --log "$log" --quiet --report "$report" "${gc[@]}" "${extra[@]}" \
        < /dev/null > "$work/out" 2> "$work/err"
    )
  } 2> /dev/null   # not the shell's "Aborted" line: the finding is reported below
  rc=$?
  seeds=$(( seeds + 1 ))
  summary=$(grep -a '^APIFUZZ_SUMMARY' "$work/out" | tail -1)
  if [[ -n $summary ]]; then
    n=$(sed -E 's/.* calls=([0-9]+).*/\1/' <<< "$summary")
    errors=$(( errors + $(sed -E 's/.* errors=([0-9]+).*/\1/' <<< "$summary") ))
    named=$(( named + $(sed -E 's/.* named=([0-9]+).*/\1/' <<< "$summary") ))
    located=$(( located + $(sed -E 's/.* located=([0-9]+).*/\1/' <<< "$summary") ))
    oneline=$(( oneline + $(sed -E 's/.* oneline=([0-9]+).*/\1/' <<< "$summary") ))
  else
    n=$(grep -ac '^C(' "$log" 2>/dev/null || true)
    n=${n:-0}
  fi
  total_calls=$(( total_calls + n ))

  last=$(grep -a '^C(' "$log" 2>/dev/null | tail -1 | cut -c1-200)
  what="" signature=""
  if (( rc == 124 || rc == 137 )); then
    what="hang (killed after $(( this_seconds + hang_seconds )) s)"
    signature="hang at: $(cut -c1-90 <<< "$last")"
  elif grep -aqE "$sanitizer_pattern" "$work/err"; then
    if leak_suppressed_with_whole_stacks; then
      echo "seed $seed: a third-party leak, suppressed once replayed with whole stacks (tests/sanitizers/lsan.supp)"
    else
      what="sanitizer: $(grep -aE "$sanitizer_pattern" "$work/err" | head -1)"
    fi
  elif grep -aq '^APIFUZZ_FINDING' "$work/err"; then
    what="oracle: $(grep -a '^APIFUZZ_FINDING' "$work/err" | head -1)"
    signature="oracle: $(grep -a -m1 '^APIFUZZ_FINDING' "$work/err" | sed -E 's/.*call [0-9]+ \(([^)]*)\).*/\1/')"
  elif (( rc > 128 )); then what="crash: killed by signal $(( rc - 128 ))"
  elif (( rc != 0 )) && [[ -z $summary ]]; then what="crash: exit status $rc without a summary: $(grep -av '^\s' "$work/err" | tail -1)"
  elif (( rc != 0 )); then
    what="exit status $rc (--strict: an error message does not name its function; the offending messages are listed at the end)"
    signature="--strict message failures"
  fi
  if [[ -n $what ]]; then
    findings=$(( findings + 1 ))
    [[ -z $signature ]] && signature=$(signature_of "$work/err" "signal/exit $rc at: $(cut -c1-90 <<< "$last")")
    cp "$log" "$out/crashes/seed_$seed.lua" 2>/dev/null
    cp "$work/err" "$out/crashes/seed_$seed.err"
    echo "FINDING seed $seed: $signature"
    echo "  $what"
    echo "  last call: $last"
    echo "  log: $out/crashes/seed_$seed.lua (replay: $binary $out/crashes/seed_$seed.lua </dev/null)"
    signature_count[$signature]=$(( ${signature_count[$signature]:-0} + 1 ))
    [[ -z ${signature_seed[$signature]:-} ]] && signature_seed[$signature]=$seed
  fi
  seed=$(( seed + 1 ))
done

pct() { if (( $2 == 0 )); then echo "100.00"; else awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", 100 * a / b }'; fi; }
elapsed=$(( SECONDS - start ))
echo "api_fuzz: $seeds seeds, $total_calls calls in $elapsed s, $findings finding(s)"
if (( findings > 0 )); then
  echo "  distinct findings (seeds, first seed, signature):"
  for sig in "${!signature_count[@]}"; do
    printf '  %5d  seed %-6s %s\n' "${signature_count[$sig]}" "${signature_seed[$sig]}" "$sig"
  done | sort -k1,1nr
fi
echo "  errors (seeds that finished): $errors; naming the function $named ($(pct "$named" "$errors")%), with file:line $located ($(pct "$located" "$errors")%), one line $oneline ($(pct "$oneline" "$errors")%)"
if [[ -s $report ]]; then
  echo "  offending messages over all seeds (count, call kind, failed checks, normalized message; top 30):"
  awk -F'\t' '{ key = $2 "\t" $3 "\t" $4; count[key] += $1 } END { for (k in count) printf "%d\t%s\n", count[k], k }' "$report" |
    sort -t$'\t' -k1,1nr | head -30 | awk -F'\t' '{ printf "  %6d  %-18s %-13s %s\n", $1, $2, $3, $4 }'
fi
(( findings == 0 ))
