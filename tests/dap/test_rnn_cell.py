"""test_rnn_cell.py: tapedeck's DAP server on the lecture's RNN cell (scripts/rnn_cell.lua), driven
by dap_client.py as an editor would: a line breakpoint, a function breakpoint inside backward,
stepping, stepping back, editing a gradient and continuing with it, the exception filters on
nan_script.lua (against what `:why` names), conditions and hit counts on loop_script.lua, pause,
stopOnEntry, output events and the end of a session.

    python3 test_rnn_cell.py path/to/tapedeck [--write-transcripts] [-k WORD]
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dap_client import HERE, SCRIPTS, check, run_cases, scaled, top_frame_checks, values_of  # noqa: E402

RNN = os.path.join(SCRIPTS, "rnn_cell.lua")
NAN_SCRIPT = os.path.join(HERE, "nan_script.lua")
LOOP_SCRIPT = os.path.join(HERE, "loop_script.lua")
LOOP_LINE = 9          # loop_script.lua: `total = total + t:sum():item() / (size * size)`
TENSOR_LINE = re.compile(r"^tensor \[(\d+(?:,\d+)*)\] float32 #\d+ \w+")


def plain_run(context, script, args, cwd):
    """Run `tapedeck script args` without the DAP server; its stdout (status 0 required)."""
    done = subprocess.run([context.tapedeck, script] + list(args), cwd=cwd, capture_output=True, text=True,
                          timeout=scaled(60))
    check(done.returncode == 0, "a plain run of %s exits 0" % script, done.stderr[-2000:])
    return done.stdout


def dwh_norm(text):
    """The number the RNN cell prints as |dloss/dW_h|."""
    match = re.search(r"\|dloss/dW_h\|\s+(-?[\d.]+)", text)
    check(match, "the output has |dloss/dW_h|", text[-2000:])
    return float(match.group(1))


def start_rnn(context, tmp, **start):
    """A session on rnn_cell.lua with cwd tmp and args [tmp/cell.svg]."""
    session = context.session()
    session.start_program(RNN, [os.path.join(tmp, "cell.svg")], cwd=tmp, **start)
    return session


def case_capabilities_entry_output_and_end(context):
    with tempfile.TemporaryDirectory() as tmp:
        svg = os.path.join(tmp, "cell.svg")
        expected_stdout = plain_run(context, RNN, [svg], tmp)
        os.remove(svg)
        session = context.session()
        capabilities = session.initialize()
        for name in ("supportsConfigurationDoneRequest", "supportsConditionalBreakpoints",
                     "supportsHitConditionalBreakpoints", "supportsFunctionBreakpoints", "supportsStepBack",
                     "supportsEvaluateForHovers", "supportsSetVariable", "supportsTerminateRequest",
                     "supportsExceptionInfoRequest"):
            check(capabilities.get(name) is True, "capability %s is true" % name, capabilities)
        filters = capabilities.get("exceptionBreakpointFilters") or []
        check([f.get("filter") for f in filters] == ["error", "nan_forward", "nan_backward"],
              "exception filters error, nan_forward, nan_backward", filters)
        check(all(isinstance(f.get("label"), str) and f["label"] for f in filters), "each filter has a label", filters)
        threads = session.request("threads")
        check(threads.get("threads") == [{"id": 1, "name": "main"}], "threads: [{id 1, name main}]", threads)

        session.launch(RNN, [svg], cwd=tmp, stop_on_entry=True)
        session.configuration_done()
        stopped = session.wait_stopped()
        check(stopped.get("reason") == "entry", "stopOnEntry stops with reason entry", stopped)
        check(stopped.get("allThreadsStopped") is True, "allThreadsStopped", stopped)
        frames = session.stack_trace()
        top_frame_checks(frames[0], "main chunk", RNN, 7)
        session.continue_()
        session.wait_end(0)
        # the stop's banner comes as output too (the server's choice): the script's lines, in order
        output = session.output_text("stdout").splitlines()
        lines = iter(output)
        check(all(line in lines for line in expected_stdout.splitlines()),
              "the output events hold the script's stdout, line by line in order", output, expected_stdout)
        check(os.path.isfile(svg), "the script wrote its SVG in the launch's cwd")
        session.disconnect()

        os.remove(svg)
        session = context.session(name="no stop")
        session.start_program(RNN, [svg], cwd=tmp)
        session.wait_end(0)
        output = session.output_text("stdout")
        check(output == expected_stdout, "with no stop, the stdout output events are what a plain run prints",
              "DAP:   " + repr(output), "plain: " + repr(expected_stdout))
        check(os.path.isfile(svg), "the script wrote its SVG in the launch's cwd")
        session.disconnect()


def check_w_h(session, frame):
    """W_h through evaluate (watch): a tensor whose children say its shape, dtype and values."""
    w_h = session.evaluate("W_h", frame, "watch")
    children = session.variables(w_h["variablesReference"])
    for name in ("shape", "dtype", "device", "node", "requires_grad", "min", "max", "mean", "std", "nan", "inf",
                 "values"):
        check(name in children, "W_h's children include %s" % name, sorted(children))
    check(re.search(r"20\D+20", children["shape"]["value"]), "W_h's shape is [20,20]", children["shape"])
    check("float32" in children["dtype"]["value"], "W_h's dtype float32", children["dtype"])
    check(children["requires_grad"]["value"] == "true", "W_h requires grad", children["requires_grad"])
    rows = session.variables(children["values"]["variablesReference"])
    check(list(rows) == ["[%d]" % i for i in range(1, 21)], "W_h's values: rows [1]..[20]", list(rows))
    first = session.evaluate_number("W_h:narrow(1, 2, 1):narrow(2, 3, 1):item()", frame)
    shown = float(session.variable_path(children["values"]["variablesReference"], "[2]", "[3]")["value"])
    check(abs(shown - first) <= 1e-4 * max(1, abs(first)), "values [2][3] is W_h[2][3]", shown, first)


def case_line_breakpoint_frame_locals_and_set_variable(context):
    with tempfile.TemporaryDirectory() as tmp:
        session = context.session()
        session.initialize()
        verified = session.set_breakpoints(RNN, [17, 20, 1])
        check(verified[0].get("verified") is True and verified[0].get("line") == 17, "line 17 verified", verified)
        for entry in verified[1:]:
            check(entry.get("verified") is False and entry.get("message"),
                  "a line with no code: verified false with a message", entry)
        session.launch(RNN, [os.path.join(tmp, "cell.svg")], cwd=tmp)
        session.configuration_done()
        stopped = session.wait_stopped()
        check(stopped.get("reason") == "breakpoint", "reason breakpoint", stopped)
        check(stopped.get("description") == "line rnn_cell.lua:17", "description 'line rnn_cell.lua:17'", stopped)
        check(verified[0].get("id") in (stopped.get("hitBreakpointIds") or [verified[0].get("id")]),
              "hitBreakpointIds names the breakpoint", stopped)
        frames = session.stack_trace()
        top_frame_checks(frames[0], "main chunk", RNN, 17)
        frame = frames[0]["id"]

        scopes = session.scopes(frame)
        check("Locals" in scopes and "Upvalues" in scopes, "Locals and Upvalues scopes", sorted(scopes))
        check("Stop" not in scopes, "no Stop scope at a line stop", sorted(scopes))
        local_vars = session.variables(scopes["Locals"]["variablesReference"])
        check("svg_path" in local_vars and "cell.svg" in local_vars["svg_path"]["value"],
              "Locals: svg_path, the script's argument", local_vars)

        check("Globals" in scopes, "a Globals scope", sorted(scopes))
        global_vars = session.variables(scopes["Globals"]["variablesReference"])
        for name in ("h2h", "i2h", "W_h"):
            check(name in global_vars and global_vars[name]["value"].startswith("tensor [20,"),
                  "Globals: %s, a tensor" % name, global_vars.get(name))
        check(global_vars["W_h"]["variablesReference"] > 0, "W_h expands", global_vars["W_h"])
        # the globals the line reads, through evaluate in the frame (hover and watch)
        for name in ("h2h", "i2h"):
            result = session.evaluate(name, frame, "hover")
            check(TENSOR_LINE.match(result["result"]) and result["result"].startswith("tensor [20,1]"),
                  "%s: one line, tensor [20,1] float32 #N op" % name, result)
            check(result.get("variablesReference", 0) > 0, "%s expands" % name, result)
        check_w_h(session, frame)
        # Set Value on a global, and on a field of a table
        session.evaluate("settings = {lr = 1}", frame, "repl")
        global_vars = session.variables(scopes["Globals"]["variablesReference"])
        check("settings" in global_vars, "a global set in the console is in Globals", sorted(global_vars))
        session.set_variable(global_vars["settings"]["variablesReference"], "lr", "5")
        check(session.evaluate_number("settings.lr", frame) == 5, "setVariable on a table's field")
        session.set_variable(scopes["Globals"]["variablesReference"], "i2h", "i2h * 0")
        check(session.evaluate_number("i2h:abs():sum():item()", frame) == 0, "setVariable on a global tensor")
        nothing = session.evaluate("next_h", frame, "watch")
        check(nothing["result"] == "nil", "next_h is nil before line 17 runs", nothing)

        # a local set through setVariable: the script writes its graph to the new path
        edited = os.path.join(tmp, "edited.svg")
        reply = session.set_variable(scopes["Locals"]["variablesReference"], "svg_path", json.dumps(edited))
        check(edited in reply.get("value", ""), "setVariable's response is the new value", reply)

        session.next()
        stopped = session.wait_stopped()
        check(stopped.get("reason") == "step", "next: reason step", stopped)
        top_frame_checks(session.stack_trace()[0], "main chunk", RNN, 18)
        result = session.evaluate("next_h", None, "watch")
        check(result["result"].startswith("tensor [20,1]"), "after next, next_h is a tensor", result)
        session.continue_()
        session.wait_end(0)
        check("wrote " + edited in session.output_text(), "the edited svg_path reached the script",
              session.output_text()[-500:])
        check(os.path.isfile(edited), "the script wrote the edited path")
        session.disconnect()


def grad_input_values(session):
    """The numbers of grad_input[1] at the current backward stop, through the Stop scope."""
    stop = session.stop_scope()
    entry = session.variable_path(stop, "grad_input", "[1]")
    values = session.variable_path(entry["variablesReference"], "values")
    return values_of(session, values["variablesReference"])


def case_bwd_tanh_next_step_back(context):
    with tempfile.TemporaryDirectory() as tmp:
        session = context.session()
        session.initialize()
        answer = session.set_function_breakpoints(["bwd tanh", "bwd tahn"])
        check(answer[0].get("verified") is True, "bwd tanh verified", answer)
        check(answer[1].get("verified") is False and "tanh" in (answer[1].get("message") or ""),
              "an unknown op: verified false, the message names a close op (tanh)", answer)
        session.launch(RNN, [os.path.join(tmp, "cell.svg")], cwd=tmp)
        session.configuration_done()
        stopped = session.wait_stopped()
        check(stopped.get("reason") == "function breakpoint", "reason 'function breakpoint'", stopped)
        check(stopped.get("description") == "backward: grad of next_h (tanh)",
              "description 'backward: grad of next_h (tanh)'", stopped)
        check("grad of next_h" in (stopped.get("text") or ""), "text: the stop's banner", stopped)

        body = session.request("stackTrace", {"threadId": 1})
        frames = body["stackFrames"]
        top_frame_checks(frames[0], "grad of next_h (tanh)", RNN, 17)
        check(body.get("totalFrames") == len(frames), "totalFrames is the number of frames", body)
        top_frame_checks(frames[1], "main chunk", RNN, 19)
        scopes = session.request("scopes", {"frameId": frames[0]["id"]})["scopes"]
        check([s["name"] for s in scopes][:3] == ["Stop", "Locals", "Upvalues"],
              "the op frame's scopes: Stop, then the script frame's Locals and Upvalues", scopes)
        lua_scopes = [s["name"] for s in session.request("scopes", {"frameId": frames[1]["id"]})["scopes"]]
        check({"Locals", "Upvalues", "Stop"} <= set(lua_scopes), "the Lua frame's scopes: Locals, Upvalues, Stop",
              lua_scopes)
        stop = scopes[0]["variablesReference"]
        names = session.variables(stop)
        for name in ("node", "out", "inputs", "saved", "grad_output", "grad_input"):
            check(name in names, "the Stop scope has %s" % name, sorted(names))
        grad_output = names["grad_output"]
        check(grad_output["value"].startswith("tensor [20,1] float32"), "grad_output: tensor [20,1] float32",
              grad_output)
        check(grad_output.get("type") == "tensor", "grad_output's type is tensor", grad_output)
        shape = session.variable_path(stop, "grad_output", "shape")
        check(re.search(r"^\W*20\W+1\W*$", shape["value"]), "grad_output's shape [20,1]", shape)
        output_before = values_of(session, session.variable_path(stop, "grad_output", "values")["variablesReference"])
        input_before = grad_input_values(session)
        check(len(output_before) == 20 and len(input_before) == 20, "20 values each", output_before, input_before)
        total = session.evaluate_number("grad_input[1]:sum():item()", frames[0]["id"])
        check(abs(total - sum(input_before)) < 1e-3, "the values shown add up to grad_input[1]:sum()",
              total, sum(input_before))
        where = session.evaluate(":where", frames[0]["id"], "repl")
        check("rnn_cell.lua:19" in where["result"], "evaluate ':where' in the repl: the Lua stack", where)

        session.next()
        stopped = session.wait_stopped()
        check(stopped.get("reason") == "step", "next: reason step", stopped)
        check(stopped.get("description") == "backward: grad of h2h + i2h (add)",
              "next moves to the next backward group, h2h + i2h (add)", stopped)
        top_frame_checks(session.stack_trace()[0], "grad of h2h + i2h (add)", RNN, 17)

        session.step_back()
        stopped = session.wait_stopped()
        check(stopped.get("reason") == "step", "stepBack: reason step", stopped)
        check(stopped.get("description") == "rewound 1 back: backward: grad of next_h (tanh)",
              "stepBack returns to tanh's group, rewound 1 back", stopped)
        top_frame_checks(session.stack_trace()[0], "grad of next_h (tanh)", RNN, 17)
        stop = session.stop_scope()
        output_back = values_of(session, session.variable_path(stop, "grad_output", "values")["variablesReference"])
        check(output_back == output_before, "rewound: grad_output as it was", output_back, output_before)
        check(grad_input_values(session) == input_before, "rewound: grad_input[1] as it was")
        grad_input = session.variable_path(stop, "grad_input")
        refused = session.set_variable(grad_input["variablesReference"], "[1]", "grad_input[1] * 2",
                                       expect_success=False)
        check("rewound" in refused["message"] or "live" in refused["message"],
              "setVariable while rewound: refused, saying why", refused)

        session.next()   # while rewound: the view moves forward, to the live stop
        stopped = session.wait_stopped()
        check(stopped.get("description") == "backward: grad of h2h + i2h (add)",
              "next while rewound: forward to the add group", stopped)
        session.continue_()
        session.wait_end(0)
        session.disconnect()


def case_set_variable_edits_gradient(context):
    with tempfile.TemporaryDirectory() as tmp:
        plain = dwh_norm(plain_run(context, RNN, [os.path.join(tmp, "plain.svg")], tmp))
        session = start_rnn(context, tmp, function_breakpoints=["bwd tanh"])
        session.wait_stopped()
        frame = session.stack_trace()[0]["id"]
        prev_h_sq = session.evaluate_number("prev_h:pow(2):sum():item()", frame)
        # the prompt's edit of a grad_input entry, then one element in place
        grad_input = session.variable_path(session.stop_scope(), "grad_input")
        reply = session.set_variable(grad_input["variablesReference"], "[1]", "grad_input[1] * 2")
        check(reply.get("value", "").startswith("tensor [20,1]"), "setVariable grad_input [1]: the new tensor",
              reply)
        doubled = grad_input_values(session)
        entry = session.variable_path(session.stop_scope(), "grad_input", "[1]")
        row = session.variable_path(entry["variablesReference"], "values", "[3]")
        reply = session.set_variable(row["variablesReference"], "[1]", "100")
        check(float(reply.get("value", "nan")) == 100, "setVariable values[3][1] = 100: the new value", reply)
        edited = grad_input_values(session)
        check(edited[2] == 100 and edited[:2] == doubled[:2] and edited[3:] == doubled[3:],
              "the element changed, the others did not", edited, doubled)
        check(session.evaluate_number("grad_input[1]:narrow(1, 3, 1):item()", frame) == 100,
              "grad_input[1][3] reads 100 through evaluate")
        # dloss/dW_h = g · prev_h: its norm is |g| |prev_h|
        expected = math.sqrt(session.evaluate_number("grad_input[1]:pow(2):sum():item()", frame) * prev_h_sq)
        session.continue_()
        session.wait_end(0)
        got = dwh_norm(session.output_text())
        check(abs(got - expected) <= 1e-3 * expected + 1e-4, "|dloss/dW_h| is the edited gradient's",
              got, expected)
        check(abs(got - plain) > 1e-2, "and differs from a plain run's", got, plain)
        session.disconnect()


def why_origin(session, frame):
    """`:why` at the stop through evaluate (repl): the op and file:line of its origin line."""
    text = session.evaluate(":why", frame, "repl")["result"]
    match = re.search(r"origin\s.*?\(#\d+ (\w+)\).*?\((\S+?):(\d+)", text)
    check(match, ":why names an origin op and line", text)
    return match.group(1), os.path.basename(match.group(2)), int(match.group(3)), text


def case_nan_forward_filter(context):
    with tempfile.TemporaryDirectory() as tmp:
        session = context.session()
        session.start_program(NAN_SCRIPT, ["forward"], cwd=tmp, exception_filters=["nan_forward"])
        stopped = session.wait_stopped()
        check(stopped.get("reason") == "exception", "nan_forward: reason exception", stopped)
        check(stopped["description"].startswith("NaN/Inf"), "description 'NaN/Inf: ...'", stopped)
        frames = session.stack_trace()
        op, file, line, text = why_origin(session, frames[0]["id"])
        check((op, file, line) == ("div", "nan_script.lua", 9), ":why at the stop: div at nan_script.lua:9", text)
        check(op in stopped["description"], "the description names the op :why names", stopped, text)
        top_frame_checks(frames[0], re.compile(r"\(div\)"), NAN_SCRIPT, line)
        out = session.variable_path(session.stop_scope(), "out", "nan")
        check(out["value"] == "1", "the op's output has 1 NaN", out)
        session.continue_()
        session.wait_end(0)
        session.disconnect()


def case_nan_backward_filter(context):
    with tempfile.TemporaryDirectory() as tmp:
        # the forward pass is finite: nan_forward alone never stops there
        session = context.session(name="nan_forward on a finite forward pass")
        session.start_program(NAN_SCRIPT, ["backward"], cwd=tmp, exception_filters=["nan_forward"])
        session.wait_end(0)
        check(not session.events("stopped"), "no stop", session.events("stopped"))
        session.disconnect()

        session = context.session()
        session.start_program(NAN_SCRIPT, ["backward"], cwd=tmp, exception_filters=["nan_backward"])
        stopped = session.wait_stopped()
        check(stopped.get("reason") == "exception", "nan_backward: reason exception", stopped)
        check(stopped["description"].startswith("NaN/Inf"), "description 'NaN/Inf: ...'", stopped)
        frames = session.stack_trace()
        op, file, line, text = why_origin(session, frames[0]["id"])
        check((file, line) == ("nan_script.lua", 14), ":why at the stop: nan_script.lua:14", text)
        check("sqrt" in stopped["description"] or "norms" in stopped["description"],
              "the description names the forward op whose gradient went bad (norms, sqrt)", stopped, text)
        top_frame_checks(frames[0], re.compile(r"norms \(sqrt\)"), NAN_SCRIPT, 14)
        session.continue_()
        session.wait_end(0)
        check("x.grad" in session.output_text(), "the script ran on to its end", session.output_text())
        session.disconnect()


def case_error_filter_post_mortem(context):
    with tempfile.TemporaryDirectory() as tmp:
        session = context.session()
        session.start_program(NAN_SCRIPT, ["error"], cwd=tmp, exception_filters=["error"])
        stopped = session.wait_stopped()
        check(stopped.get("reason") == "exception", "error filter: reason exception", stopped)
        check(stopped["description"].startswith("error: ") and "cannot be broadcast" in stopped["description"],
              "description 'error: <message>'", stopped)
        top_frame_checks(session.stack_trace()[0], "main chunk", NAN_SCRIPT, 19)
        session.continue_()
        session.wait_end(1)
        session.disconnect()


def case_disconnect_at_stop(context):
    with tempfile.TemporaryDirectory() as tmp:
        session = start_rnn(context, tmp, function_breakpoints=["bwd tanh"])
        session.wait_stopped()
        started = time.monotonic()
        session.disconnect(timeout=5)
        check(time.monotonic() - started < scaled(5), "tapedeck left within 5 s")


def case_terminate_at_stop(context):
    with tempfile.TemporaryDirectory() as tmp:
        session = start_rnn(context, tmp, function_breakpoints=["bwd tanh"])
        session.wait_stopped()
        session.request("terminate")
        session.wait_event("terminated")
        check("wrote" not in session.output_text(), "the program was abandoned", session.output_text())
        session.disconnect()


def case_step_in_out_reverse_continue(context):
    with tempfile.TemporaryDirectory() as tmp:
        session = start_rnn(context, tmp, function_breakpoints=["bwd tanh"])
        session.wait_stopped()
        session.resume("reverseContinue")
        stopped = session.wait_stopped()
        check(stopped.get("reason") == "step", "reverseContinue: reason step", stopped)
        check(stopped["description"] == "rewound 12 back: forward: W_h (randn)",
              "reverseContinue: the oldest of the 12 events before the stop, W_h's randn", stopped)
        frames = session.stack_trace()
        top_frame_checks(frames[0], "W_h (randn)", RNN, 10)
        top_frame_checks(frames[1], "main chunk", RNN, 19)
        session.step_in()   # rewound: the view moves one event forward
        stopped = session.wait_stopped()
        check(stopped["description"] == "rewound 11 back: forward: W_x (randn)", "stepIn while rewound: W_x's randn",
              stopped)
        top_frame_checks(session.stack_trace()[0], "W_x (randn)", RNN, 11)
        session.continue_()   # resumes live: from the tanh group to the end
        session.wait_end(0)
        check("wrote" in session.output_text(), "the program ran to its end", session.output_text()[-500:])
        session.disconnect()

        session = start_rnn(context, tmp, function_breakpoints=["bwd tanh"])
        session.wait_stopped()
        session.step_in()
        stopped = session.wait_stopped()
        check(stopped.get("reason") == "step", "stepIn: reason step", stopped)
        check(stopped["description"] != "backward: grad of next_h (tanh)", "stepIn moved", stopped)
        session.resume("stepOut")   # :finish: until backward() has returned
        stopped = session.wait_stopped()
        check(stopped.get("reason") == "step", "stepOut: reason step", stopped)
        frame = session.stack_trace()[0]
        check(frame.get("name") == "main chunk" and frame.get("line", 0) >= 19,
              "stepOut: backward() has returned, in the main chunk", frame)
        session.continue_()
        session.wait_end(0)
        session.disconnect()


def case_step_back_from_a_line_stop_shows_the_op(context):
    with tempfile.TemporaryDirectory() as tmp:
        session = start_rnn(context, tmp, function_breakpoints=["bwd tanh"])
        session.wait_stopped()
        session.resume("stepOut")
        stopped = session.wait_stopped()
        check(stopped["description"] == "line rnn_cell.lua:21", "stepOut: the line after backward()", stopped)
        session.step_back()
        stopped = session.wait_stopped()
        check(stopped["description"] == "rewound 1 back: backward: grad of h2h (mm)",
              "stepBack from the line stop: the last backward group, h2h's mm", stopped)
        # as at every node or group stop, the first frame is the op, at its forward line
        frames = session.stack_trace()
        top_frame_checks(frames[0], "grad of h2h (mm)", RNN, 15)
        session.disconnect()


def case_forward_stop_names_the_op(context):
    with tempfile.TemporaryDirectory() as tmp:
        session = start_rnn(context, tmp, function_breakpoints=["fwd tanh"])
        stopped = session.wait_stopped()
        # As the terminal's banner names it: the output is no variable's yet (the line has not
        # assigned it), and its input (h2h + i2h) has no name of its own.
        check(stopped["description"] == "forward: #10 tanh", "description 'forward: #10 tanh'", stopped)
        top_frame_checks(session.stack_trace()[0], "#10 tanh", RNN, 17)
        session.disconnect()


def case_set_out_at_a_forward_stop(context):
    with tempfile.TemporaryDirectory() as tmp:
        session = start_rnn(context, tmp, function_breakpoints=["fwd tanh"])
        session.wait_stopped()
        stop = session.stop_scope()
        refused = session.set_variable(stop, "node", "1", expect_success=False)
        check(refused["message"], "the node's record is not editable: refused with a message", refused)
        reply = session.set_variable(stop, "out", "out * 0")
        check(reply.get("value", "").startswith("tensor [20,1]"), "setVariable out: the new tensor", reply)
        check(session.evaluate_number("out:abs():sum():item()") == 0, "out reads zeros")
        session.set_function_breakpoints([])
        session.continue_()
        session.wait_end(0)
        check(re.search(r"loss\s+-?0\.0000\n", session.output_text()), "the loss of the edited next_h is 0",
              session.output_text())
        session.disconnect()


def case_function_breakpoint_conditions_and_hit_counts(context):
    reasons = []

    def stop_lines(breakpoint):
        """The top frame's line at each stop of a run with one function breakpoint (each stop's
        reason is kept in `reasons`, checked at the end)."""
        session = context.session(name="function breakpoint %s" % (breakpoint,))
        with tempfile.TemporaryDirectory() as tmp:
            session.start_program(RNN, [os.path.join(tmp, "cell.svg")], cwd=tmp, function_breakpoints=[breakpoint])
            lines = []
            while True:
                session.wait_for(lambda: len(session.events("stopped")) > len(lines) or session.events("exited"),
                                 "a stop or the end", 60)
                if len(session.events("stopped")) == len(lines):
                    break
                stopped = session.wait_stopped()
                reasons.append((breakpoint, stopped.get("reason")))
                lines.append(session.stack_trace()[0]["line"])
                session.continue_()
            session.wait_end(0)
            session.disconnect()
        return lines

    # h2h = torch.mm(W_h, prev_h:t()) at line 15 (max 8.99), i2h = torch.mm(W_x, x:t()) at 16 (max 7.95)
    check(stop_lines("fwd mm") == [15, 16], "fwd mm: h2h's and i2h's products")
    check(stop_lines("mm") == [15, 16, 16, 15], "mm: forward, then backward (i2h's group first)")
    check(stop_lines("bwd *") == [18, 17, 17, 16, 15], "bwd *: every backward group, sum, tanh, add, mm, mm")
    check(stop_lines({"name": "fwd mm", "condition": "max > 8.5"}) == [15], "fwd mm if max > 8.5: h2h only")
    check(stop_lines({"name": "fwd mm", "condition": "t:min():item() > 0"}) == [], "a Lua condition of t: no stop")
    check(stop_lines({"name": "fwd mm", "hitCondition": "== 2"}) == [16], "fwd mm, hit == 2: i2h only")
    check(stop_lines({"name": "fwd mm", "hitCondition": ">= 2"}) == [16], "fwd mm, hit >= 2: i2h")
    check(all(reason == "function breakpoint" for _, reason in reasons),
          "every stop's reason is 'function breakpoint'", [r for r in reasons if r[1] != "function breakpoint"])
    session = context.session(name="bad function breakpoints")
    session.initialize()
    answer = session.set_function_breakpoints([{"name": "fwd mm", "condition": "max >"}, "bwd",
                                               {"name": "fwd mm", "hitCondition": "x"}])
    for entry in answer:
        check(entry.get("verified") is False and entry.get("message"), "verified false with a message", entry)
    session.disconnect()


def case_launch_and_configuration_done_either_order(context):
    with tempfile.TemporaryDirectory() as tmp:
        session = context.session()
        session.initialize()
        session.configuration_done()
        time.sleep(0.2)
        check(not session.events("output"), "nothing runs before launch", session.events("output"))
        session.launch(LOOP_SCRIPT, ["3"], cwd=tmp)
        session.wait_end(0)
        check(session.output_text("stdout") == "total\t6.0\n", "the program ran once launch came",
              session.output_text())
        session.disconnect()


def case_set_breakpoints_replaces_and_sets_a_local(context):
    session = context.session()
    session.initialize()
    session.set_breakpoints(LOOP_SCRIPT, [5, {"line": LOOP_LINE, "condition": "i == 2"}])
    answer = session.set_breakpoints(LOOP_SCRIPT, [{"line": LOOP_LINE, "condition": "i == 3"}])
    check(answer[0].get("verified") is True, "verified", answer)
    session.launch(LOOP_SCRIPT, [])
    session.configuration_done()
    stopped = session.wait_stopped()
    frame = session.stack_trace()[0]
    check(frame["line"] == LOOP_LINE, "the replaced breakpoints are gone: the first stop is at line %d" % LOOP_LINE,
          frame)
    local_vars = session.scopes(frame["id"])["Locals"]["variablesReference"]
    check(session.variables(local_vars)["i"]["value"] == "3", "i == 3", session.variables(local_vars))
    # total is 1 + 2 = 3 here; set to 1000 it ends 1000 + 3 + 4 + 5
    reply = session.set_variable(local_vars, "total", "1000")
    check(reply.get("value") == "1000", "setVariable total = 1000", reply)
    check(session.variables(local_vars)["total"]["value"] == "1000", "Locals show the new total")
    session.set_breakpoints(LOOP_SCRIPT, [])
    session.continue_()
    session.wait_end(0)
    check(session.output_text("stdout").endswith("total\t1012.0\n"), "the loop went on from the edited total",
          session.output_text())
    session.disconnect()


def case_tensor_grad_child(context):
    with tempfile.TemporaryDirectory() as tmp:
        session = start_rnn(context, tmp, line_breakpoints={RNN: [22]})   # after loss:backward()
        session.wait_stopped()
        frame = session.stack_trace()[0]["id"]
        children = session.variables(session.evaluate("W_h", frame, "watch")["variablesReference"])
        check("grad" in children and children["grad"]["value"].startswith("tensor [20,20] float32"),
              "after backward, W_h's children include its grad, a tensor", sorted(children))
        grad = session.variables(children["grad"]["variablesReference"])
        norm = math.sqrt(sum(v * v for v in values_of(session, grad["values"]["variablesReference"], 400)))
        check(abs(norm - 5.6194) < 1e-3, "the grad's values: |dloss/dW_h| = 5.6194, as the script prints", norm)
        children = session.variables(session.evaluate("prev_h", frame, "watch")["variablesReference"])
        check("grad" not in children, "a tensor with no grad has no grad child", sorted(children))
        session.disconnect()


def case_completions_in_the_console(context):
    with tempfile.TemporaryDirectory() as tmp:
        session = context.session()
        capabilities = session.start_program(RNN, [os.path.join(tmp, "cell.svg")], cwd=tmp,
                                             function_breakpoints=["bwd tanh"])
        check(capabilities.get("supportsCompletionsRequest") is True, "supportsCompletionsRequest", capabilities)
        session.wait_stopped()
        frame = session.stack_trace()[0]["id"]
        for text, expected in (("W_", {"W_h", "W_x"}), (":wh", {":where", ":why"}),
                               ("grad_", {"grad_input", "grad_output"})):
            body = session.request("completions", {"text": text, "column": len(text) + 1, "frameId": frame})
            labels = {t.get("label") for t in body.get("targets", [])}
            check(expected <= labels, "completions of %r include %s" % (text, sorted(expected)), body)
        session.disconnect()


def case_evaluate_statements_errors_tables(context):
    with tempfile.TemporaryDirectory() as tmp:
        session = start_rnn(context, tmp, line_breakpoints={RNN: [17]})
        session.wait_stopped()
        frame = session.stack_trace()[0]["id"]
        check(session.evaluate("scale = 3", frame, "repl")["result"] == "", "a statement in the repl: result ''")
        check(session.evaluate_number("scale + 1", frame) == 4, "the statement's global is there")
        error = session.evaluate("nosuch.field", frame, "watch", expect_success=False)
        check("attempt to index a nil value" in error["message"], "an error: the Lua error", error)
        table = session.evaluate("{a = 1, w = W_h}", frame, "watch")
        check(table["variablesReference"] > 0, "a table expands", table)
        fields = session.variables(table["variablesReference"])
        check(fields["a"]["value"] == "1" and fields["a"].get("type") == "number", "a = 1, a number", fields)
        check(fields["w"]["value"].startswith("tensor [20,20] float32"), "w: W_h's line", fields)
        printed = session.evaluate(":p h2h:sum()", frame, "repl")["result"]
        check(printed.startswith("tensor("), "':p' in the repl: what it printed", printed)
        seq = session.send("next", {"threadId": 1})
        reply = session.response(seq)
        stopped = session.wait_event("stopped")
        with session.cond:
            check(session.messages.index(reply) < session.messages.index(stopped),
                  "the resume's response comes before the stop it leads to")
        session.disconnect()


def case_conditions_and_hit_counts(context):
    def stops_of(breakpoint):
        session = context.session(name="breakpoint %s" % breakpoint)
        session.start_program(LOOP_SCRIPT, [], line_breakpoints={LOOP_SCRIPT: [breakpoint]})
        seen = []
        while True:
            session.wait_for(lambda: len(session.events("stopped")) > len(seen) or session.events("exited"),
                             "a stop or the end", 60)
            if len(session.events("stopped")) == len(seen):
                break
            stopped = session.wait_stopped()
            check(stopped.get("reason") == "breakpoint", "reason breakpoint", stopped)
            frame = session.stack_trace()[0]
            check(frame.get("line") == LOOP_LINE, "stopped at line %d" % LOOP_LINE, frame)
            local_vars = session.variables(session.scopes(frame["id"])["Locals"]["variablesReference"])
            seen.append(int(float(local_vars["i"]["value"])))
            session.continue_()
        session.wait_end(0)
        check("total\t15.0" in session.output_text(), "the loop ran to its end", session.output_text())
        session.disconnect()
        return seen

    check(stops_of({"line": LOOP_LINE, "condition": "i == 4"}) == [4], "condition i == 4: one stop, i = 4")
    check(stops_of({"line": LOOP_LINE, "hitCondition": "== 2"}) == [2], "hitCondition == 2: the 2nd hit only")
    check(stops_of({"line": LOOP_LINE, "hitCondition": ">= 4"}) == [4, 5], "hitCondition >= 4: hits 4 and 5")
    check(stops_of({"line": LOOP_LINE, "hitCondition": "3"}) == [3, 4, 5], "hitCondition 3: hit 3 and after")

    session = context.session(name="bad breakpoints")
    session.initialize()
    answer = session.set_breakpoints(LOOP_SCRIPT, [{"line": LOOP_LINE, "condition": "i =="},
                                                   {"line": LOOP_LINE, "hitCondition": "often"}])
    for entry in answer:
        check(entry.get("verified") is False and entry.get("message"),
              "a condition that does not compile, a hit count that is no count: verified false + message", entry)
    session.disconnect()


def case_breakpoint_set_and_terminate_while_running(context):
    session = context.session()
    session.start_program(LOOP_SCRIPT, ["100000000"])
    time.sleep(0.5)
    answer = session.set_breakpoints(LOOP_SCRIPT, [LOOP_LINE])
    check(answer[0].get("verified") is True, "a breakpoint set while the program runs is verified", answer)
    stopped = session.wait_stopped(timeout=10)
    check(stopped.get("reason") == "breakpoint", "it stops there", stopped)
    check(session.stack_trace()[0].get("line") == LOOP_LINE, "at line %d" % LOOP_LINE)
    session.set_breakpoints(LOOP_SCRIPT, [])
    session.continue_()
    time.sleep(0.3)
    session.request("terminate")
    session.wait_event("terminated", timeout=10)
    check(not session.events("stopped")[1:], "no stop after the breakpoints were cleared", session.events("stopped"))
    session.disconnect(timeout=5)


def case_condition_error_and_exception_info(context):
    session = context.session(name="a condition that raises")
    session.start_program(LOOP_SCRIPT, [], line_breakpoints={LOOP_SCRIPT: [{"line": LOOP_LINE,
                                                                         "condition": "nosuch.x > 1"}]})
    stopped = session.wait_stopped()
    check("error in the condition" in stopped.get("text", ""), "a condition that raises stops and says so", stopped)
    session.disconnect()

    session = context.session(name="exceptionInfo")
    session.start_program(NAN_SCRIPT, ["forward"], exception_filters=["nan_forward"])
    session.wait_stopped()
    info = session.request("exceptionInfo", {"threadId": 1})
    check(info.get("exceptionId") == "nan_forward" and "NaN" in info.get("description", ""),
          "exceptionInfo: the filter and what it found", info)
    check(info.get("breakMode") in ("always", "unhandled", "userUnhandled", "never"), "a DAP breakMode", info)
    session.disconnect()


def case_pause_while_running(context):
    session = context.session()
    session.start_program(LOOP_SCRIPT, ["100000000"])
    time.sleep(0.5)
    session.request("pause", {"threadId": 1})
    stopped = session.wait_stopped(timeout=10)
    check(stopped.get("reason") == "pause", "pause: reason pause", stopped)
    frame = session.stack_trace()[0]
    check((frame.get("source") or {}).get("path") == LOOP_SCRIPT, "paused in loop_script.lua", frame)
    session.disconnect(timeout=5)


def case_launch_options_no_debug_and_logpoints(context):
    """noDebug runs past breakpoints; a launch key tapedeck does not read is said, not ignored; a
    logpoint is refused rather than made a breakpoint that stops."""
    with tempfile.TemporaryDirectory() as tmp:
        session = context.session()
        session.initialize()
        logpoint = session.set_breakpoints(RNN, [{"line": 17, "logMessage": "h = {next_h}"}])[0]
        check(logpoint.get("verified") is False and "logpoint" in logpoint.get("message", ""),
              "a logpoint: unverified, saying logpoints are not supported", logpoint)
        session.set_breakpoints(RNN, [17])
        session.set_function_breakpoints(["bwd tanh"])
        session.request("launch", {"program": RNN, "args": [os.path.join(tmp, "cell.svg")], "cwd": tmp,
                                   "noDebug": True, "env": {"A": "1"}, "console": "integratedTerminal",
                                   "name": "run", "__sessionId": "x"})
        session.configuration_done()
        session.wait_end(0)
        check(not session.events("stopped"), "noDebug: no stop at the line or the backward breakpoint",
              session.events("stopped"))
        said = session.output_text("important")
        check("'env'" in said and "'console'" in said and "'name'" not in said and "__sessionId" not in said,
              "the launch keys it does not read are named (env, console), the client's own are not", said)
        check(re.search(r"\|dloss/dW_h\|\s+5\.6194", session.output_text()), "the script ran to its end",
              session.output_text())
        session.disconnect()


if __name__ == "__main__":
    run_cases(globals(), sys.argv)
