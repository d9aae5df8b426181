#!/bin/sh
# x_lost.sh TAPEDECK SCRIPT: the X server dies under an open viewer (Ctrl-C on `xvfb-run tapedeck
# --view ...` kills Xvfb too; an ssh -X connection drops). Starts a private Xvfb, runs
# `tapedeck --view SCRIPT READY_FILE`, kills the Xvfb once the script says it is computing, and
# checks that tapedeck exits 0, printed the viewer's message and what the script printed after.
# Exit 77 (CTest: skipped) where Xvfb is not installed or cannot start.
tapedeck=$1
script=$2
if ! command -v Xvfb >/dev/null 2>&1; then
  echo "SKIP: Xvfb is not installed (apt-get install xvfb)"
  exit 77
fi
work=$(mktemp -d)
xvfb_pid=
tapedeck_pid=
cleanup() {
  [ -n "$tapedeck_pid" ] && kill "$tapedeck_pid" 2>/dev/null
  [ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# -displayfd: Xvfb picks a free display number and writes it when it is ready for clients.
Xvfb -displayfd 3 -screen 0 1280x1024x24 -nolisten tcp 3>"$work/display" 2>"$work/xvfb.log" &
xvfb_pid=$!
for _ in $(seq 100); do
  [ -s "$work/display" ] && break
  kill -0 "$xvfb_pid" 2>/dev/null || break
  sleep 0.1
done
if [ ! -s "$work/display" ]; then
  cat "$work/xvfb.log"
  echo "SKIP: Xvfb could not start"
  exit 77
fi
DISPLAY=:$(cat "$work/display")
export DISPLAY

# At most 90 s: a tapedeck stuck on the dead connection fails the test (status 124), not CTest's timeout.
timeout -k 5 90 "$tapedeck" --view "$script" "$work/ready" >"$work/out" 2>"$work/err" &
tapedeck_pid=$!
for _ in $(seq 600); do
  [ -s "$work/ready" ] && break
  kill -0 "$tapedeck_pid" 2>/dev/null || break
  sleep 0.1
done
if [ ! -s "$work/ready" ]; then
  cat "$work/out" "$work/err"
  if grep -q "cannot open a window" "$work/err"; then echo "SKIP: no window on the private X server"; exit 77; fi
  echo "FAIL: the script never said it was computing"
  exit 1
fi
kill "$xvfb_pid"
wait "$xvfb_pid" 2>/dev/null
xvfb_pid=
wait "$tapedeck_pid"
status=$?
tapedeck_pid=
cat "$work/out"
cat "$work/err" >&2
fail=0
[ "$status" -eq 0 ] || { echo "FAIL: tapedeck exited with status $status, not 0"; fail=1; }
grep -q "viewer: the connection to the X display was lost" "$work/err" ||
  { echo "FAIL: no message saying the X display was lost"; fail=1; }
[ "$(grep -c "viewer: the connection to the X display was lost" "$work/err")" -le 1 ] ||
  { echo "FAIL: the message was printed more than once"; fail=1; }
grep -q "^x_lost: the viewer closed after" "$work/out" ||
  { echo "FAIL: the script did not finish"; fail=1; }
exit $fail
