#!/bin/sh
# Ctrl-C twice within a second leaves tapedeck with status 130 and says so, even when the running
# script survives the first one; two Ctrl-C further apart do not. Usage: interrupt_twice.sh TAPEDECK
# (run in tests/repl).
tapedeck="$1"
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$tapedeck" interrupt_twice.lua </dev/null >"$out" 2>"$err" &
pid=$!
for i in $(seq 50); do grep -q running "$out" && break; sleep 0.1; done   # started
kill -INT "$pid"
sleep 1.5             # a second apart: each is one interrupt
kill -INT "$pid"
for i in $(seq 50); do [ "$(grep -c caught "$out")" -ge 2 ] && break; sleep 0.1; done
kill -INT "$pid"      # within a second of the last one: leave
wait "$pid"
rc=$?
fail() { echo "interrupt_twice: $1"; echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$err"; exit 1; }
[ "$rc" -eq 130 ] || fail "exit status $rc, expected 130"
[ "$(grep -c "caught: interrupted! (going on)" "$out")" -eq 2 ] || fail "expected the first two Ctrl-C (1.5 s apart) to interrupt the script once each"
grep -q "tapedeck: interrupted twice within a second: leaving (exit status 130)" "$err" || fail "no message for the second Ctrl-C"
echo "interrupt_twice: ok"
