"""dap_client.py: a Debug Adapter Protocol client for tapedeck's DAP server tests, written with
Python's standard library only (no editor, no debugpy).

A DapSession starts `tapedeck --dap` (DAP over its stdin/stdout) or connects to `tapedeck
--dap-port N`. A reader thread parses the Content-Length frames into messages; requests carry a
seq, and `request()` waits for the response with that request_seq. Every wait has a timeout:
when it runs out, DapTimeout is raised with the last messages seen and tapedeck's stderr, so a
test fails and says where, never hangs. Every raw message both ways is kept in order (the
transcript, written with `write_transcript`).

The test scripts use `run_cases()`: each `case_*` function is one case, run in order, each
printing PASS or FAIL; the script exits 1 when any failed, 77 (ctest: skipped) when this
tapedeck has no DAP server, 66 when a sanitizer reported on tapedeck.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

SKIP = 77
SANITIZER_EXIT = 66
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPTS = os.path.join(SOURCE_ROOT, "scripts")
TRANSCRIPTS = os.path.join(HERE, "transcripts")

# Under the sanitizer build tapedeck runs several times slower: every wait scales.
UNDER_SANITIZER = any(v in os.environ for v in ("ASAN_OPTIONS", "UBSAN_OPTIONS"))
TIME_SCALE = 6.0 if UNDER_SANITIZER else 1.0
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "ERROR: UndefinedBehaviorSanitizer")


class DapTimeout(AssertionError):
    """A wait ran out: the message says for what, and shows the last messages and stderr."""


class CheckFailed(AssertionError):
    """A test's expectation did not hold."""


class SanitizerReport(AssertionError):
    """tapedeck exited with a sanitizer report (its status or its stderr)."""


def scaled(seconds):
    """A timeout in seconds, longer under the sanitizer build."""
    return seconds * TIME_SCALE


def check(condition, what, *context):
    """Raise CheckFailed(what, with the context objects as JSON) unless `condition`."""
    if not condition:
        details = "".join("\n  " + (c if isinstance(c, str) else json.dumps(c, indent=None)[:3000])
                          for c in context)
        raise CheckFailed(what + details)


def frame_message(body):
    """The bytes of one DAP message: the Content-Length header and the JSON body."""
    data = json.dumps(body).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(data) + data


class DapSession:
    """One DAP session with a tapedeck: over a child's pipes (`start`) or a TCP socket (`connect`).

    messages: every message received, in order (parsed JSON; a frame that was not JSON is a dict
    {"unparsed": text}). raw: [(direction, bytes)] of everything sent ('>') and received ('<'),
    in order, for transcripts. Waits use `cond`; the reader thread appends and notifies."""

    def __init__(self, reader, writer, process=None, sock=None, name="session"):
        self.name = name
        self.process = process
        self.sock = sock
        self._reader = reader
        self._writer = writer
        self.cond = threading.Condition()
        self.messages = []
        self.raw = []
        self.notes = []
        self.stderr_chunks = []
        self.eof = False
        self.reader_error = None
        self.seq = 0
        self._consumed = set()          # indexes in self.messages of events already waited for
        self.exit_status = None
        self._thread = threading.Thread(target=self._read_loop, daemon=True)
        self._thread.start()
        self._stderr_thread = None
        if process is not None and process.stderr is not None:
            self._stderr_thread = threading.Thread(target=self._stderr_loop, daemon=True)
            self._stderr_thread.start()

    # --- starting ------------------------------------------------------------------------------

    @classmethod
    def start(cls, tapedeck, args=("--dap",), cwd=None, env=None, name="session"):
        """Start `tapedeck --dap` with pipes for stdin, stdout and stderr."""
        process = subprocess.Popen([tapedeck] + list(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, cwd=cwd, env=env)
        return cls(process.stdout, process.stdin, process=process, name=name)

    @classmethod
    def connect(cls, port, host="127.0.0.1", timeout=10, name="session"):
        """Connect to a `tapedeck --dap-port` server."""
        deadline = time.monotonic() + scaled(timeout)
        while True:
            try:
                sock = socket.create_connection((host, port), timeout=scaled(timeout))
                break
            except ConnectionRefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        sock.settimeout(None)
        return cls(sock.makefile("rb", buffering=0), sock.makefile("wb", buffering=0), sock=sock, name=name)

    # --- the reader ----------------------------------------------------------------------------

    def _read_exact(self, count):
        data = b""
        while len(data) < count:
            chunk = self._reader.read(count - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def _read_one(self):
        """One framed message (header bytes, body bytes), or None at EOF."""
        header = b""
        while not header.endswith(b"\r\n\r\n"):
            byte = self._reader.read(1)
            if not byte:
                return None
            header += byte
            if len(header) > 4096:
                raise ValueError("a header over 4096 bytes from tapedeck: %r" % header[:200])
        match = re.search(rb"Content-Length: *(\d+)", header)
        if not match:
            raise ValueError("a header without Content-Length from tapedeck: %r" % header)
        body = self._read_exact(int(match.group(1)))
        if body is None:
            return None
        return header, body

    def _read_loop(self):
        try:
            while True:
                frame = self._read_one()
                if frame is None:
                    break
                header, body = frame
                try:
                    message = json.loads(body.decode("utf-8"))
                except ValueError:
                    message = {"unparsed": body.decode("utf-8", "replace")}
                with self.cond:
                    self.raw.append(("<", header + body))
                    self.messages.append(message)
                    self.cond.notify_all()
        except Exception as error:  # noqa: BLE001 - reported by the next wait
            self.reader_error = "%s: %s" % (type(error).__name__, error)
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def _stderr_loop(self):
        for chunk in iter(lambda: self.process.stderr.read1(65536), b""):
            with self.cond:
                self.stderr_chunks.append(chunk)
                self.cond.notify_all()

    def stderr_text(self):
        with self.cond:
            return b"".join(self.stderr_chunks).decode("utf-8", "replace")

    # --- sending -------------------------------------------------------------------------------

    def send_raw(self, data):
        """Send bytes as they are (a bad header, a body that is not JSON)."""
        with self.cond:
            self.raw.append((">", data))
        self._writer.write(data)
        self._writer.flush()

    def send(self, command, arguments=None):
        """Send a request; return its seq."""
        self.seq += 1
        body = {"seq": self.seq, "type": "request", "command": command}
        if arguments is not None:
            body["arguments"] = arguments
        self.send_raw(frame_message(body))
        return self.seq

    def check_protocol(self):
        """What DAP asks of every message tapedeck sent: seq increasing from 1; a response names a
        request of ours (its command) and comes once, with success true or false; an event has a
        name."""
        with self.cond:
            received = list(self.messages)
            sent = {}
            for direction, data in self.raw:
                if direction == ">" and b"\r\n\r\n" in data:
                    try:
                        request = json.loads(data.split(b"\r\n\r\n", 1)[1])
                        sent[request["seq"]] = request["command"]
                    except (ValueError, KeyError, TypeError):
                        pass   # a malformed message sent on purpose
        answered = set()
        for index, message in enumerate(received):
            check(message.get("seq") == index + 1, "%s: message %d from tapedeck has seq %d" % (
                self.name, index + 1, index + 1), message)
            kind = message.get("type")
            check(kind in ("response", "event"), "%s: a message of type response or event" % self.name, message)
            if kind == "event":
                check(isinstance(message.get("event"), str), "%s: an event has a name" % self.name, message)
                continue
            request_seq = message.get("request_seq")
            check(request_seq in sent and sent[request_seq] == message.get("command"),
                  "%s: a response to a request of ours, naming its command" % self.name, message)
            check(request_seq not in answered, "%s: one response per request" % self.name, message)
            check(isinstance(message.get("success"), bool), "%s: success true or false" % self.name, message)
            answered.add(request_seq)

    def note(self, text):
        """A line of commentary in the transcript (what the case does next)."""
        with self.cond:
            self.raw.append(("#", text.encode("utf-8")))

    # --- waiting -------------------------------------------------------------------------------

    def describe_recent(self, count=12):
        """The last `count` messages and the tail of stderr, for a failure's message."""
        with self.cond:
            recent = self.messages[-count:]
        lines = ["last %d of %d messages from tapedeck:" % (len(recent), len(self.messages))]
        lines += ["  " + json.dumps(m)[:600] for m in recent]
        if self.eof:
            lines.append("  (tapedeck closed the connection%s)" %
                         ("; reader: " + self.reader_error if self.reader_error else ""))
        stderr = self.stderr_text()
        if stderr:
            lines.append("tapedeck's stderr (last 2000 characters):\n" + stderr[-2000:])
        return "\n".join(lines)

    def wait_for(self, predicate, what, timeout=30):
        """Wait until predicate() (called under the lock) returns a true value; return it. On timeout
        or EOF before it holds: DapTimeout naming `what`."""
        deadline = time.monotonic() + scaled(timeout)
        with self.cond:
            while True:
                found = predicate()
                if found:
                    return found
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    break
                self.cond.wait(min(left, 0.5))
        raise DapTimeout("%s: waited for %s (%s)\n%s" % (
            self.name, what, "tapedeck closed the connection" if self.eof else "%gs" % scaled(timeout),
            self.describe_recent()))

    def response(self, seq, timeout=30):
        """The response to request `seq` (success or not)."""
        def find():
            for m in self.messages:
                if m.get("type") == "response" and m.get("request_seq") == seq:
                    return m
            return None
        return self.wait_for(find, "the response to request %d" % seq, timeout)

    def request(self, command, arguments=None, timeout=30, expect_success=True):
        """Send a request and wait for its response. expect_success True: the response must have
        success true (its body is returned); False: it must be an error (the response is
        returned); None: the response is returned either way."""
        seq = self.send(command, arguments)
        reply = self.response(seq, timeout)
        check(reply.get("command") == command, "response to %s names command %r" % (command, reply.get("command")),
              reply)
        if expect_success is True:
            check(reply.get("success") is True, "%s: success true expected" % command, reply)
            return reply.get("body") or {}
        if expect_success is False:
            check(reply.get("success") is False, "%s: an error response expected" % command, reply)
            check(isinstance(reply.get("message"), str) and reply["message"],
                  "%s: an error response carries a message" % command, reply)
        return reply

    def wait_event(self, event, timeout=30, predicate=None):
        """The first event named `event` not yet waited for (and satisfying predicate, when given);
        it is marked consumed."""
        def find():
            for index, m in enumerate(self.messages):
                if (index not in self._consumed and m.get("type") == "event" and m.get("event") == event
                        and (predicate is None or predicate(m))):
                    self._consumed.add(index)
                    return m
            return None
        return self.wait_for(find, "a %r event" % event, timeout)

    def events(self, event):
        """Every event named `event` received so far."""
        with self.cond:
            return [m for m in self.messages if m.get("type") == "event" and m.get("event") == event]

    def output_text(self, category=None):
        """The text of every output event so far (of one category, when given), joined."""
        return "".join(m.get("body", {}).get("output", "") for m in self.events("output")
                       if category is None or m.get("body", {}).get("category") == category)

    def wait_output(self, text, timeout=30, category=None):
        """Wait until the output events so far contain `text`."""
        return self.wait_for(lambda: text in self.output_text(category), "output containing %r" % text, timeout)

    # --- the protocol's steps ------------------------------------------------------------------

    def initialize(self):
        """initialize; return the capabilities. The `initialized` event must follow."""
        capabilities = self.request("initialize", {
            "clientID": "tapedeck-tests", "adapterID": "tapedeck", "linesStartAt1": True,
            "columnsStartAt1": True, "pathFormat": "path", "supportsVariableType": True})
        self.wait_event("initialized")
        return capabilities

    def launch(self, program, args=(), cwd=None, stop_on_entry=False, expect_success=True):
        arguments = {"program": program, "args": list(args)}
        if cwd is not None:
            arguments["cwd"] = cwd
        if stop_on_entry:
            arguments["stopOnEntry"] = True
        return self.request("launch", arguments, expect_success=expect_success)

    def set_breakpoints(self, path, lines):
        """setBreakpoints on `path`: lines are numbers or dicts {line, condition?, hitCondition?}.
        Returns the response's breakpoints."""
        breakpoints = [b if isinstance(b, dict) else {"line": b} for b in lines]
        body = self.request("setBreakpoints", {"source": {"path": path}, "breakpoints": breakpoints})
        check(len(body.get("breakpoints", [])) == len(breakpoints),
              "setBreakpoints: one entry per requested breakpoint", body)
        return body["breakpoints"]

    def set_function_breakpoints(self, names):
        """setFunctionBreakpoints: names are strings or dicts {name, condition?, hitCondition?}."""
        breakpoints = [b if isinstance(b, dict) else {"name": b} for b in names]
        body = self.request("setFunctionBreakpoints", {"breakpoints": breakpoints})
        check(len(body.get("breakpoints", [])) == len(breakpoints),
              "setFunctionBreakpoints: one entry per requested breakpoint", body)
        return body["breakpoints"]

    def set_exception_breakpoints(self, filters):
        return self.request("setExceptionBreakpoints", {"filters": list(filters)})

    def configuration_done(self):
        return self.request("configurationDone")

    def start_program(self, program, args=(), cwd=None, stop_on_entry=False, function_breakpoints=(),
                      line_breakpoints=None, exception_filters=None):
        """initialize, breakpoints, launch, configurationDone: the usual start of a session.
        line_breakpoints: {path: [line or dict, ...]}. Returns the capabilities."""
        capabilities = self.initialize()
        for path, lines in (line_breakpoints or {}).items():
            for b in self.set_breakpoints(path, lines):
                check(b.get("verified") is True, "breakpoint at %s verified" % path, b)
        if function_breakpoints:
            for b in self.set_function_breakpoints(function_breakpoints):
                check(b.get("verified") is True, "function breakpoint verified", b)
        if exception_filters is not None:
            self.set_exception_breakpoints(exception_filters)
        self.launch(program, args, cwd, stop_on_entry)
        self.configuration_done()
        return capabilities

    def wait_stopped(self, timeout=60):
        """The next `stopped` event's body; checks threadId 1 and a one-line description."""
        body = self.wait_event("stopped", timeout).get("body", {})
        check(body.get("threadId") == 1, "stopped: threadId 1", body)
        description = body.get("description")
        check(isinstance(description, str) and description and "\n" not in description,
              "stopped: a one-line description", body)
        return body

    def stack_trace(self):
        body = self.request("stackTrace", {"threadId": 1})
        frames = body.get("stackFrames")
        check(isinstance(frames, list) and frames, "stackTrace: some frames", body)
        return frames

    def scopes(self, frame_id):
        """{scope name: scope} of a frame."""
        body = self.request("scopes", {"frameId": frame_id})
        return {s["name"]: s for s in body.get("scopes", [])}

    def variables(self, reference):
        """{name: variable} of a variablesReference (the order kept in the dict)."""
        check(isinstance(reference, int) and reference > 0, "a variablesReference > 0", reference)
        body = self.request("variables", {"variablesReference": reference})
        return {v["name"]: v for v in body.get("variables", [])}

    def variable_path(self, reference, *names):
        """Follow names down from a variablesReference: variable_path(ref, "grad_output", "values",
        "[1]") is that variable (dict). Fails naming the missing step."""
        variable = None
        for depth, name in enumerate(names):
            if variable is not None:
                reference = variable.get("variablesReference", 0)
                check(reference > 0, "%s expands" % "/".join(names[:depth]), variable)
            children = self.variables(reference)
            check(name in children, "%s has a child %r" % ("/".join(names[:depth]) or "the scope", name),
                  sorted(children))
            variable = children[name]
        return variable

    def stop_scope(self, frame_id=None):
        """The "Stop" scope's variables of the top frame (or of frame_id)."""
        if frame_id is None:
            frame_id = self.stack_trace()[0]["id"]
        scopes = self.scopes(frame_id)
        check("Stop" in scopes, "a Stop scope", sorted(scopes))
        return scopes["Stop"]["variablesReference"]

    def evaluate(self, expression, frame_id=None, context="repl", expect_success=True):
        arguments = {"expression": expression, "context": context}
        if frame_id is not None:
            arguments["frameId"] = frame_id
        return self.request("evaluate", arguments, expect_success=expect_success)

    def evaluate_number(self, expression, frame_id=None):
        """evaluate `expression` (a Lua number) and return it as a float."""
        result = self.evaluate(expression, frame_id, "watch")["result"]
        try:
            return float(result)
        except ValueError:
            raise CheckFailed("evaluate %r: a number expected, got %r" % (expression, result))

    def set_variable(self, reference, name, value, expect_success=True):
        return self.request("setVariable", {"variablesReference": reference, "name": name, "value": value},
                            expect_success=expect_success)

    def resume(self, command):
        """next / stepIn / stepOut / stepBack / reverseContinue / continue on thread 1."""
        return self.request(command, {"threadId": 1})

    def next(self):
        return self.resume("next")

    def step_in(self):
        return self.resume("stepIn")

    def step_back(self):
        return self.resume("stepBack")

    def continue_(self):
        return self.resume("continue")

    def wait_end(self, exit_code=0, timeout=60):
        """The program's end: `exited` with exit_code, then `terminated`."""
        exited = self.wait_event("exited", timeout)
        check(exited.get("body", {}).get("exitCode") == exit_code, "exited with exitCode %d" % exit_code, exited)
        terminated = self.wait_event("terminated", timeout)
        with self.cond:
            check(self.messages.index(exited) < self.messages.index(terminated), "exited comes before terminated")
        return exited

    def disconnect(self, timeout=5):
        """disconnect, then the process must exit with status 0 within `timeout` seconds."""
        self.request("disconnect", {"terminateDebuggee": True})
        return self.wait_exit(0, timeout)

    # --- the end -------------------------------------------------------------------------------

    def close_input(self):
        """Close our side (stdin of the child, or the socket): the client leaves."""
        self.note("the client closes the connection")
        try:
            if self.sock is not None:
                self.sock.shutdown(socket.SHUT_RDWR)
            else:
                self._writer.close()
        except OSError:
            pass

    def wait_exit(self, status=0, timeout=5):
        """The child must exit within `timeout` seconds (scaled), with `status` (None: any); its
        stderr must hold no sanitizer report. Returns the status."""
        check(self.process is not None, "wait_exit needs a child process")
        try:
            self.exit_status = self.process.wait(scaled(timeout))
        except subprocess.TimeoutExpired:
            raise DapTimeout("%s: tapedeck did not exit within %gs\n%s" % (self.name, scaled(timeout),
                                                                           self.describe_recent()))
        self._thread.join(5)
        self.check_no_sanitizer_report()
        if status is not None:
            check(self.exit_status == status, "tapedeck exits with status %d, not %d" % (status, self.exit_status),
                  self.stderr_text()[-2000:])
        return self.exit_status

    def check_no_sanitizer_report(self):
        """A sanitizer report in stderr, or the sanitizer's exit status, fails the test."""
        if self._stderr_thread is not None and self.process.poll() is not None:
            self._stderr_thread.join(5)   # what the child wrote before it ended, all of it
        stderr = self.stderr_text()
        for marker in SANITIZER_MARKERS:
            if marker in stderr:
                raise SanitizerReport("%s: a sanitizer report from tapedeck:\n%s" % (self.name, stderr[-6000:]))
        if self.exit_status == SANITIZER_EXIT and UNDER_SANITIZER:
            raise SanitizerReport("%s: tapedeck exited with the sanitizer's status %d:\n%s" %
                                  (self.name, SANITIZER_EXIT, stderr[-6000:]))

    def kill(self):
        """Leave nothing behind: kill the child if it still runs (after a failed case)."""
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def write_transcript(self, path, title):
        """Write every message both ways, framed as sent, to `path` (file_write_whole's rule: a
        temporary file renamed over it, so a transcript is whole or absent)."""
        parts = [b"# " + title.encode("utf-8") + b"\n",
                 b"# '>>>' client to tapedeck, '<<<' tapedeck to client, each followed by the bytes of one\n"
                 b"# message exactly as framed on the wire (header CRLFs included), then a newline.\n"]
        with self.cond:
            raw = list(self.raw)
        for direction, data in raw:
            if direction == "#":
                parts.append(b"\n# " + data + b"\n")
            else:
                parts.append(b"%s %d bytes\n" % (b">>>" if direction == ">" else b"<<<", len(data)))
                parts.append(data + b"\n")
        if self.process is not None:
            parts.append(b"\n# tapedeck's exit status: %s\n" % str(self.exit_status).encode())
            stderr = self.stderr_text()
            if stderr:
                parts.append(b"# tapedeck's stderr:\n" + stderr.encode("utf-8"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = path + ".tmp"
        with open(temporary, "wb") as f:
            f.write(b"".join(parts))
        os.replace(temporary, path)


# --- helpers the test scripts share ---------------------------------------------------------------

def top_frame_checks(frame, name, path, line):
    """The top frame is named `name` (a string, or a regex when given as re.Pattern), at the
    absolute `path` and `line`."""
    if isinstance(name, re.Pattern):
        check(name.search(frame.get("name", "")), "top frame's name matches %s" % name.pattern, frame)
    else:
        check(frame.get("name") == name, "top frame named %r" % name, frame)
    source = frame.get("source") or {}
    check(source.get("path") == path, "top frame's source.path is %s" % path, frame)
    check(os.path.isabs(source.get("path", "")), "top frame's source.path is absolute", frame)
    check(frame.get("line") == line, "top frame's line is %d" % line, frame)


def values_of(session, reference, limit=200):
    """The numbers under a tensor's `values` (1-D: one level; 2-D: rows then numbers), flat, in order."""
    children = session.variables(reference)
    numbers = []
    for name, variable in children.items():
        if name == "...":
            continue
        if variable.get("variablesReference", 0) > 0:
            numbers += values_of(session, variable["variablesReference"], limit)
        else:
            numbers.append(float(variable["value"]))
        if len(numbers) >= limit:
            break
    return numbers


def probe_dap(tapedeck):
    """Exit 77 (skipped) when this tapedeck has no DAP server."""
    try:
        probe = subprocess.run([tapedeck, "--dap"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=scaled(20))
    except subprocess.TimeoutExpired:
        print("FAIL: `tapedeck --dap` with stdin at EOF did not exit within %gs" % scaled(20))
        sys.exit(1)
    # an older tapedeck: "unknown option"; one built without nlohmann's JSON says it has no DAP server
    if re.search(r"unknown option|has no DAP|without (the )?DAP|DAP server is not built", probe.stderr):
        print("SKIP: this tapedeck has no DAP server (`tapedeck --dap`: %s)" % probe.stderr.strip()[:200])
        sys.exit(SKIP)


def run_cases(module_globals, argv):
    """Run every `case_*` function of the calling test script in definition order, each with a
    Context. argv: [script, tapedeck, options...]; `--write-transcripts` makes the cases write
    tests/dap/transcripts/<case>.txt; `-k WORD` runs only the cases whose name contains WORD."""
    if len(argv) < 2:
        print("usage: %s path/to/tapedeck [--write-transcripts] [-k WORD]" % argv[0])
        sys.exit(2)
    tapedeck = os.path.abspath(argv[1])
    write = "--write-transcripts" in argv
    only = argv[argv.index("-k") + 1] if "-k" in argv else None
    probe_dap(tapedeck)
    cases = [(n, f) for n, f in module_globals.items() if n.startswith("case_") and callable(f)]
    failed, sanitizer = [], False
    for name, function in cases:
        if only and only not in name:
            continue
        context = Context(tapedeck, name[len("case_"):], write)
        started = time.monotonic()
        try:
            function(context)
            context.finish()
            print("PASS %s (%.1fs)" % (name, time.monotonic() - started))
        except Exception as error:  # noqa: BLE001 - every failure is reported and counted
            sanitizer = sanitizer or isinstance(error, SanitizerReport)
            failed.append(name)
            print("FAIL %s (%.1fs)\n%s" % (name, time.monotonic() - started,
                                           "".join(traceback.format_exception(type(error), error, error.__traceback__))))
            if not isinstance(error, DapTimeout):   # a timeout's message shows them already
                for session in context.sessions:
                    print(session.describe_recent(8))
            context.cleanup()
        sys.stdout.flush()
    print("%d case(s) failed: %s" % (len(failed), ", ".join(failed)) if failed else "all cases passed")
    sys.exit(SANITIZER_EXIT if sanitizer else 1 if failed else 0)


class Context:
    """What a case gets: the tapedeck to run, its sessions (killed and checked at the end), and
    where its transcript goes."""

    def __init__(self, tapedeck, name, write_transcripts):
        self.tapedeck = tapedeck
        self.name = name
        self.write_transcripts = write_transcripts
        self.sessions = []
        self.servers = []

    def session(self, args=("--dap",), cwd=None, name=None):
        session = DapSession.start(self.tapedeck, args, cwd=cwd, name=name or self.name)
        self.sessions.append(session)
        return session

    def port_server(self, port=0):
        """`tapedeck --dap-port` (0: a free port), stopped (SIGTERM) and checked at the end."""
        server = PortServer(self.tapedeck, port)
        self.servers.append(server)
        return server

    def connect(self, port, name=None):
        session = DapSession.connect(port, name=name or self.name)
        self.sessions.append(session)
        return session

    def finish(self):
        """After a passing case: write the transcript when asked, then leave nothing running. A
        child still running here is killed; its stderr is still checked for sanitizer reports."""
        if self.write_transcripts:
            for index, session in enumerate(self.sessions):
                suffix = "" if len(self.sessions) == 1 else "_%d" % (index + 1)
                session.write_transcript(os.path.join(TRANSCRIPTS, self.name + suffix + ".txt"),
                                         "tests/dap: case %s%s" % (self.name, suffix))
        for server in self.servers:
            server.stop()
        self.cleanup()
        for session in self.sessions:
            session.check_no_sanitizer_report()
            session.check_protocol()

    def cleanup(self):
        for session in self.sessions:
            session.kill()
        for server in self.servers:
            if server.poll() is None:
                server.send_signal(signal.SIGTERM)
                try:
                    server.wait(10)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait(10)


class PortServer:
    """`tapedeck --dap-port N` (0: a free port) started as a child: waits for its line
    `tapedeck: DAP server on 127.0.0.1:N` on stderr and keeps reading stderr (where the
    sessions' children report too)."""

    LISTENING = re.compile(r"tapedeck: DAP server on 127\.0\.0\.1:(\d+)")

    def __init__(self, tapedeck, port=0, timeout=20):
        self.process = subprocess.Popen([tapedeck, "--dap-port", str(port)], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.cond = threading.Condition()
        self.stderr = b""
        self.port = None
        self._thread = threading.Thread(target=self._stderr_loop, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + scaled(timeout)
        with self.cond:
            while self.port is None:
                match = self.LISTENING.search(self.stderr.decode("utf-8", "replace"))
                if match:
                    self.port = int(match.group(1))
                    break
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    self.stop()
                    raise DapTimeout("tapedeck --dap-port %d: no line 'tapedeck: DAP server on 127.0.0.1:N' on "
                                     "stderr within %gs; stderr:\n%s" % (port, scaled(timeout), self.stderr_text()))
                self.cond.wait(min(left, 0.2))

    def _stderr_loop(self):
        for chunk in iter(lambda: self.process.stderr.read1(65536), b""):
            with self.cond:
                self.stderr += chunk
                self.cond.notify_all()

    def stderr_text(self):
        with self.cond:
            return self.stderr.decode("utf-8", "replace")

    def poll(self):
        return self.process.poll()

    def send_signal(self, sig):
        self.process.send_signal(sig)

    def wait(self, timeout):
        status = self.process.wait(timeout)
        self._thread.join(5)
        return status

    def kill(self):
        self.process.kill()

    def stop(self, timeout=5):
        """SIGTERM, then it must end within `timeout` seconds (scaled); returns its status. Its
        stderr (its sessions' children's too) must hold no sanitizer report."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            status = self.wait(scaled(timeout))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
            raise DapTimeout("tapedeck --dap-port did not end within %gs of SIGTERM" % scaled(timeout))
        stderr = self.stderr_text()
        for marker in SANITIZER_MARKERS:
            if marker in stderr:
                raise SanitizerReport("a sanitizer report from tapedeck --dap-port:\n" + stderr[-6000:])
        return status
