#!/bin/sh
# run_headless.sh COMMAND...: run COMMAND under a private X server (xvfb-run, 1280x1024x24) and
# exit with its status; exit 77 (CTest: skipped) with a message when no X server can start.
if ! command -v xvfb-run >/dev/null 2>&1; then
  echo "SKIP: xvfb-run is not installed (apt-get install xvfb xauth)"
  exit 77
fi
errors=$(mktemp)
trap 'rm -f "$errors"' EXIT
xvfb-run -a -s "-screen 0 1280x1024x24" "$@" 2>"$errors"
status=$?
cat "$errors" >&2
if [ $status -ne 0 ] && grep -q -e "Xvfb failed to start" -e "xauth command not found" "$errors"; then
  echo "SKIP: no X server could start (see above)"
  exit 77
fi
exit $status
