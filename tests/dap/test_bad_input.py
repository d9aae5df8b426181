"""test_bad_input.py: tapedeck's DAP server given what a broken or hostile client sends, and its TCP
port: malformed JSON, an unknown command, requests in the wrong state, bad headers, a client that
leaves at a stop or while the program runs (an error response or a clean end, never a crash or a
hung process), `--dap-port` bound to 127.0.0.1 only, and two sessions one after the other.

    python3 test_bad_input.py path/to/tapedeck [--write-transcripts] [-k WORD]

With --write-transcripts each case writes its raw protocol (every message both ways, framed as
sent) to tests/dap/transcripts/<case>.txt.
"""
import os
import re
import signal
import socket
import sys
import tempfile
import time

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dap_client import HERE, SCRIPTS, check, frame_message, run_cases, scaled  # noqa: E402

RNN = os.path.join(SCRIPTS, "rnn_cell.lua")
LOOP_SCRIPT = os.path.join(HERE, "loop_script.lua")
SESSION_SCRIPT = os.path.join(HERE, "session_script.lua")
FOREVER = "100000000"   # loop_script.lua's iterations: far longer than any test waits


def case_malformed_json(context):
    session = context.session()
    session.initialize()
    session.note("a well-framed body that is not JSON")
    body = b'{"seq": 2, "type": "request",'
    session.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    session.wait_event("output", predicate=lambda m: m.get("body", {}).get("category") == "important")
    session.note("a body that is JSON but no request")
    session.send_raw(frame_message([1, 2, 3]))
    session.note("the session goes on: the next request is answered")
    threads = session.request("threads")
    check(threads.get("threads") == [{"id": 1, "name": "main"}], "threads answered after the bad bodies", threads)
    session.disconnect()


def case_unknown_command(context):
    session = context.session()
    session.initialize()
    reply = session.request("frobnicate", {"x": 1}, expect_success=False)
    check("unknown request 'frobnicate'" in reply["message"], "message: unknown request 'frobnicate'", reply)
    session.request("threads")
    session.disconnect()


def case_wrong_state(context):
    session = context.session()
    session.note("configurationDone before initialize")
    reply = session.request("configurationDone", expect_success=False)
    check("initialize" in reply["message"], "the error says to initialize first", reply)
    session.initialize()
    session.note("requests that need a stop, before launch")
    for command, arguments in (("stackTrace", {"threadId": 1}), ("scopes", {"frameId": 1}),
                               ("variables", {"variablesReference": 1}), ("next", {"threadId": 1}),
                               ("stepBack", {"threadId": 1})):
        reply = session.request(command, arguments, expect_success=False)
        check("stopped" in reply["message"], "the error says the request needs a stop", reply)
    session.note("launch without a program, and of a file that does not exist")
    session.request("launch", {"args": []}, expect_success=False)
    session.launch("/nonexistent/tapedeck/script.lua", expect_success=False)
    session.launch(HERE, expect_success=False)   # a directory
    session.note("launch, then launch again")
    session.launch(LOOP_SCRIPT, [FOREVER])
    reply = session.launch(LOOP_SCRIPT, [FOREVER], expect_success=False)
    check("already" in reply["message"], "the error says the program is launched already", reply)
    session.configuration_done()
    session.note("the program runs: requests that need a stop")
    time.sleep(0.3)
    for command, arguments in (("stackTrace", {"threadId": 1}), ("next", {"threadId": 1}),
                               ("variables", {"variablesReference": 1})):
        reply = session.request(command, arguments, expect_success=False)
        check("running" in reply["message"], "the error says the program is running", reply)
    session.request("threads")
    session.disconnect(timeout=5)


def bad_header(context, data):
    """Send `data` as the first bytes: tapedeck says so on stderr and exits 1, without waiting."""
    session = context.session()
    session.send_raw(data)
    session.wait_exit(1, timeout=5)
    check(session.stderr_text().strip(), "a message on stderr", session.stderr_text())


def case_bad_header_no_content_length(context):
    bad_header(context, b"Content-Type: application/json\r\n\r\n{}")


def case_bad_header_not_a_number(context):
    bad_header(context, b"Content-Length: twelve\r\n\r\n{}")


def case_bad_header_over_64_mb(context):
    bad_header(context, b"Content-Length: 67108865\r\n\r\n{}")


def case_bad_header_after_a_good_message(context):
    session = context.session()
    session.initialize()
    session.send_raw(b"Content-Length: -5\r\n\r\n")
    session.wait_exit(1, timeout=5)


def case_bad_header_over_8_kb(context):
    bad_header(context, b"X" * 9000)


def case_input_ends_inside_a_message(context):
    for name, data in (("inside a header", b"Content-Len"), ("inside a body", b"Content-Length: 100\r\n\r\n{")):
        session = context.session(name="the input ends " + name)
        session.send_raw(data)
        session.close_input()
        session.wait_exit(1, timeout=5)
        check("ended inside" in session.stderr_text(), "stderr says the input ended inside a message",
              session.stderr_text())


def case_script_reads_stdin_and_fails(context):
    session = context.session()
    session.start_program(os.path.join(HERE, "io_script.lua"), [])
    session.wait_end(0)
    check(session.output_text("stdout") == "stdin gave\tnothing\nno newline at the end",
          "the script read nothing from stdin; its stdout as output events", session.output_text("stdout"))
    check(session.output_text("stderr") == "to stderr\n", "its stderr as stderr output events",
          session.output_text("stderr"))
    session.request("threads")   # the protocol was not the script's to read
    session.disconnect()

    session = context.session(name="a script that fails, with no exception filter")
    session.start_program(os.path.join(HERE, "nan_script.lua"), ["error"])
    session.wait_end(1)
    check("cannot be broadcast" in session.output_text("stderr"), "the error comes as stderr output",
          session.output_text())
    session.disconnect()


def case_client_closes_at_stop(context):
    with tempfile.TemporaryDirectory() as tmp:
        session = context.session()
        session.start_program(RNN, [os.path.join(tmp, "cell.svg")], cwd=tmp, function_breakpoints=["bwd tanh"])
        session.wait_stopped()
        session.close_input()
        session.wait_exit(0, timeout=5)
        check("wrote" not in session.output_text(), "the program was abandoned", session.output_text())


def case_client_closes_while_running(context):
    session = context.session()
    session.start_program(LOOP_SCRIPT, [FOREVER])
    time.sleep(0.5)
    session.close_input()
    session.wait_exit(0, timeout=5)


def case_client_closes_inside_a_long_op(context):
    session = context.session()
    session.start_program(LOOP_SCRIPT, [FOREVER, "6000"])   # each product of 6000 x 6000: seconds
    time.sleep(1.5)
    started = time.monotonic()
    session.close_input()
    # an op cannot be broken into: the server's watchdog ends the process 5 s after the client left
    session.wait_exit(0, timeout=8)
    print("  the client left inside a long op: tapedeck exited %.2f s later" % (time.monotonic() - started))


def case_client_closes_before_launch(context):
    session = context.session()
    session.initialize()
    session.close_input()
    session.wait_exit(0, timeout=5)


def listening_sockets(port):
    """[(table, local address hex, state hex)] of /proc/net/tcp and tcp6 entries on `port`."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, port_hex = fields[1].split(":")
            if int(port_hex, 16) == port and fields[3] == "0A":   # 0A: LISTEN
                found.append((os.path.basename(table), address))
    return found


def local_ipv4_addresses():
    """This machine's IPv4 addresses other than loopback (from /proc/net/fib_trie)."""
    try:
        with open("/proc/net/fib_trie") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    addresses = set()
    for previous, line in zip(lines, lines[1:]):
        match = re.search(r"\|--\s+(\d+\.\d+\.\d+\.\d+)", previous)
        if "/32 host LOCAL" in line and match and not match.group(1).startswith("127."):
            addresses.add(match.group(1))
    return sorted(addresses)


def run_session_script(context, port, name):
    """One session over TCP: session_script.lua runs to its end; returns what it printed."""
    session = context.connect(port, name=name)
    session.start_program(SESSION_SCRIPT, [])
    session.wait_end(0)
    output = session.output_text("stdout")
    session.request("disconnect", {"terminateDebuggee": True})
    session.wait_for(lambda: session.eof, "the session's end (the connection closed)", 5)
    return output


def case_port_binds_loopback_only(context):
    server = context.port_server()
    sockets = listening_sockets(server.port)
    check(sockets == [("tcp", "0100007F")], "one listening socket on port %d, at 127.0.0.1" % server.port, sockets)
    addresses = local_ipv4_addresses()
    print("  listening: %s; connections refused at: %s" % (sockets, ", ".join(addresses) or "(no other address)"))
    for address in addresses:
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        probe.settimeout(5)
        try:
            refused = probe.connect_ex((address, server.port)) != 0
        finally:
            probe.close()
        check(refused, "a connection to %s:%d (not loopback) is refused" % (address, server.port))
    check(run_session_script(context, server.port, "over 127.0.0.1") == "fresh\n", "a session over 127.0.0.1 runs")
    server.stop()


def children_of(pid):
    """The process ids of `pid`'s children, with their states (R, S, Z, ...)."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            children = f.read().split()
    except OSError:
        return []
    states = []
    for child in children:
        try:
            with open("/proc/%s/stat" % child) as f:
                states.append((int(child), f.read().rsplit(")", 1)[1].split()[0]))
        except OSError:
            pass   # gone since
    return states


def case_port_two_sessions(context):
    server = context.port_server()
    first = run_session_script(context, server.port, "first session")
    check(server.poll() is None, "the server still listens after a session")
    second = run_session_script(context, server.port, "second session")
    check(first == "fresh\n" and second == "fresh\n", "each session has a fresh Lua state", first, second)
    deadline = time.monotonic() + scaled(5)
    while children_of(server.process.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    check(not children_of(server.process.pid), "the ended sessions' processes are reaped (no zombies)",
          children_of(server.process.pid))
    started = time.monotonic()
    server.stop(timeout=5)
    check(time.monotonic() - started < scaled(5), "SIGTERM ends the server within 5 s")


def case_port_sessions_at_once(context):
    server = context.port_server()
    with tempfile.TemporaryDirectory() as tmp:
        first = context.connect(server.port, name="first session")
        first.start_program(RNN, [os.path.join(tmp, "cell.svg")], cwd=tmp, function_breakpoints=["bwd tanh"])
        first.wait_stopped()
        check(run_session_script(context, server.port, "a second session while the first is stopped") == "fresh\n",
              "a second session runs while the first is stopped")
        first.continue_()
        first.wait_end(0)
        first.request("disconnect")
        first.wait_for(lambda: first.eof, "the first session's end", 5)
    started = time.monotonic()
    server.process.send_signal(signal.SIGINT)   # Ctrl-C ends the server too
    server.wait(scaled(5))
    check(time.monotonic() - started < scaled(5), "SIGINT ends the server within 5 s")


def case_port_client_leaves_at_stop(context):
    server = context.port_server()
    with tempfile.TemporaryDirectory() as tmp:
        session = context.connect(server.port)
        session.start_program(RNN, [os.path.join(tmp, "cell.svg")], cwd=tmp, function_breakpoints=["bwd tanh"])
        session.wait_stopped()
        session.close_input()
        session.wait_for(lambda: session.eof, "the session's end (the connection closed)", 5)
    check(run_session_script(context, server.port, "the next session") == "fresh\n",
          "the server takes the next session")
    server.stop()


if __name__ == "__main__":
    run_cases(globals(), sys.argv)
