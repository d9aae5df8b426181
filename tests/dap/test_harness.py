"""test_harness.py: the DAP tests' client must be able to fail. Against stand-in servers (this
Python, not tapedeck): a request nobody answers fails within its timeout and shows the last
messages; a server that exits with a sanitizer report (its stderr, or the sanitizer's exit
status 66) fails the session; a frame split across writes is read whole.

    python3 test_harness.py
"""
import os
import sys
import time

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dap_client  # noqa: E402
from dap_client import DapSession, DapTimeout, SanitizerReport, check  # noqa: E402

# A stand-in server: announces itself with one event (its header and body written in pieces),
# then reads stdin to EOF and answers nothing; at EOF it does what argv[1] says.
STAND_IN = r"""
import sys, time
out = sys.stdout.buffer
body = b'{"seq": 1, "type": "event", "event": "output", "body": {"category": "stdout", "output": "hello"}}'
for piece in (b"Content-Len", b"gth: %d\r\n" % len(body), b"\r\n", body[:10], body[10:]):
    out.write(piece); out.flush(); time.sleep(0.05)
sys.stdin.buffer.read()
if sys.argv[1] == "asan":
    sys.stderr.write("==1234==ERROR: AddressSanitizer: heap-use-after-free on address 0x602000000010\n")
    sys.exit(66)
if sys.argv[1] == "ubsan":
    sys.stderr.write("engine/core/tape.cpp:12:3: runtime error: signed integer overflow\n")
    sys.exit(0)
if sys.argv[1] == "status66":
    sys.exit(66)
"""


def stand_in(mode):
    return DapSession.start(sys.executable, ["-c", STAND_IN, mode], name="stand-in " + mode)


def main():
    failures = []

    def case(name, function):
        try:
            function()
            print("PASS " + name)
        except Exception as error:  # noqa: BLE001 - counted and shown
            failures.append(name)
            print("FAIL %s: %s: %s" % (name, type(error).__name__, error))

    def unanswered_request_times_out():
        session = stand_in("clean")
        session.wait_output("hello", timeout=5)
        started = time.monotonic()
        try:
            session.request("threads", timeout=1)
        except DapTimeout as error:
            check("the response to request 1" in str(error) and "hello" in str(error),
                  "the timeout names what it waited for and shows the last messages", str(error))
        else:
            raise AssertionError("a request nobody answers did not fail")
        check(time.monotonic() - started < dap_client.scaled(1) + 2, "it failed within its timeout")
        session.close_input()
        session.wait_exit(0, timeout=5)

    def report_fails(mode):
        def run():
            session = stand_in(mode)
            session.wait_output("hello", timeout=5)
            session.close_input()
            try:
                session.wait_exit(None, timeout=5)
            except SanitizerReport:
                return
            raise AssertionError("a stand-in that exits %s passed" % mode)
        return run

    case("a request nobody answers fails within its timeout", unanswered_request_times_out)
    case("an AddressSanitizer report fails the session", report_fails("asan"))
    case("an UndefinedBehaviorSanitizer report fails the session", report_fails("ubsan"))
    dap_client.UNDER_SANITIZER = True   # status 66 is the sanitizer's only under the sanitizer build
    case("exit status 66 under the sanitizer build fails the session", report_fails("status66"))
    print("%d case(s) failed" % len(failures) if failures else "all cases passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
