"""test_tiny_gpt.py: tapedeck's DAP server inside tiny GPT's attention backward
(scripts/models/tiny_gpt.lua, one training step): a function breakpoint `bwd softmax` stops with
the op frame at tiny_gpt_model.lua:54, the Stop scope's grad_output expands down to numbers, the
script frames' locals expand (a tensor of 35,149 values shows 100 and says how many more), then
`next` and `stepBack`, and a disconnect at the stop.

    python3 test_tiny_gpt.py path/to/tapedeck [--write-transcripts] [-k WORD]
"""
import os
import re
import sys
import tempfile

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dap_client import SCRIPTS, check, run_cases, top_frame_checks  # noqa: E402

TINY_GPT = os.path.join(SCRIPTS, "models", "tiny_gpt.lua")
MODEL = os.path.join(SCRIPTS, "models", "tiny_gpt_model.lua")
SOFTMAX_LINE = 54       # tiny_gpt_model.lua: `att = att:softmax(-1)`
BACKWARD_LINE = 59      # tiny_gpt.lua: `loss:backward()` in train_step
STEP_CALL_LINE = 74     # tiny_gpt.lua: `loss = step(x, y)` in the main chunk


def number(variable):
    """A variable's value as a float (Lua's spelling of NaN and Inf included)."""
    try:
        return float(variable["value"])
    except (KeyError, ValueError):
        raise AssertionError("a number expected: %r" % (variable,))


def check_grad_output(session, stop):
    """grad_output of attention's softmax: [16,4,32,32] float32, statistics, values four levels deep."""
    children = session.variables(session.variable_path(stop, "grad_output")["variablesReference"])
    for name in ("shape", "dtype", "device", "node", "requires_grad", "min", "max", "mean", "std", "nan", "inf",
                 "values"):
        check(name in children, "grad_output has %s" % name, sorted(children))
    check(re.search(r"16\D+4\D+32\D+32", children["shape"]["value"]), "shape [16,4,32,32]", children["shape"])
    check("float32" in children["dtype"]["value"], "dtype float32", children["dtype"])
    check("cpu" in children["device"]["value"], "device cpu", children["device"])
    low, high, mean = number(children["min"]), number(children["max"]), number(children["mean"])
    check(low <= mean <= high and low < high, "min <= mean <= max", low, mean, high)
    check(number(children["std"]) > 0, "std > 0", children["std"])
    check(number(children["nan"]) == 0 and number(children["inf"]) == 0, "no NaN, no Inf in grad_output",
          children["nan"], children["inf"])
    reference = children["values"]["variablesReference"]
    for depth, count in enumerate((16, 4, 32)):
        rows = session.variables(reference)
        check(list(rows) == ["[%d]" % i for i in range(1, count + 1)], "level %d: rows [1]..[%d]" % (depth + 1, count),
              list(rows))
        check(all(r.get("variablesReference", 0) > 0 for r in rows.values()), "rows expand", rows["[1]"])
        reference = rows["[1]"]["variablesReference"]
    numbers = session.variables(reference)
    check(list(numbers) == ["[%d]" % i for i in range(1, 33)], "the last level: 32 numbers", list(numbers))
    values = [number(v) for v in numbers.values()]
    check(all(v.get("variablesReference", 0) == 0 and v.get("type") == "number" for v in numbers.values()),
          "numbers do not expand, type number", numbers["[1]"])
    check(all(low <= v <= high for v in values), "the values lie within min and max", values, low, high)
    return values


def start_at_bwd_softmax(context, tmp):
    session = context.session()
    session.start_program(TINY_GPT, ["--steps", "1"], cwd=tmp, function_breakpoints=["bwd softmax"])
    stopped = session.wait_stopped(timeout=120)
    check(stopped.get("reason") == "function breakpoint", "reason 'function breakpoint'", stopped)
    check(stopped.get("description") == "backward: grad of att (softmax)",
          "description 'backward: grad of att (softmax)'", stopped)
    return session


def case_bwd_softmax_variables_next_step_back(context):
    with tempfile.TemporaryDirectory() as tmp:
        session = start_at_bwd_softmax(context, tmp)
        frames = session.stack_trace()
        top_frame_checks(frames[0], "grad of att (softmax)", MODEL, SOFTMAX_LINE)
        lua_frames = [f for f in frames[1:] if (f.get("source") or {}).get("path") == TINY_GPT]
        check([f["line"] for f in lua_frames] == [BACKWARD_LINE, STEP_CALL_LINE],
              "the script's frames: train_step at loss:backward(), the main chunk at step(x, y)", frames)
        check(lua_frames[-1]["name"] == "main chunk", "the outermost frame is the main chunk", lua_frames)
        for frame in frames[1:]:
            source = frame.get("source") or {}
            check(source.get("path") or source.get("presentationHint") == "subtle" or frame.get(
                "presentationHint") == "subtle", "a frame with no path is a library frame, subtle", frame)

        stop = session.stop_scope(frames[0]["id"])
        before = check_grad_output(session, stop)
        grad_input = session.variable_path(stop, "grad_input", "[1]")
        check(grad_input["value"].startswith("tensor [16,4,32,32] float32"), "grad_input [1]: the gradient to att",
              grad_input)

        # the script frame's locals: train_step's x, y, loss; the main chunk's data and config
        step_scopes = session.scopes(lua_frames[0]["id"])
        step_locals = session.variables(step_scopes["Locals"]["variablesReference"])
        for name in ("x", "y", "loss"):
            check(name in step_locals, "train_step's Locals has %s" % name, sorted(step_locals))
        check(step_locals["x"]["value"].startswith("tensor [16,32] int64"), "x: tensor [16,32] int64",
              step_locals["x"])
        step_upvalues = session.variables(step_scopes["Upvalues"]["variablesReference"])
        check("last_loss" in step_upvalues, "train_step's Upvalues has last_loss", sorted(step_upvalues))
        loss = session.variables(step_locals["loss"]["variablesReference"])
        check(loss["dtype"]["value"].find("float32") >= 0 and 2 < number(loss["mean"]) < 6,
              "loss expands: float32, about ln(76) before training", loss)
        main_locals = session.variables(session.scopes(lua_frames[-1]["id"])["Locals"]["variablesReference"])
        config = session.variables(main_locals["config"]["variablesReference"])
        check(config.get("n_embd", {}).get("value") == "32", "config (a table) expands by key: n_embd = 32",
              sorted(config))
        data = session.variables(main_locals["data"]["variablesReference"])
        check(re.search(r"35149", data["shape"]["value"]), "data: [35149]", data["shape"])
        values = session.variables(data["values"]["variablesReference"])
        names = list(values)
        check(names[:100] == ["[%d]" % i for i in range(1, 101)] and names[100:] == ["..."],
              "a 1-D tensor of 35,149: values [1]..[100], then '...'", names[:3], names[-3:])
        check("35049" in values["..."]["value"], "'...' says how many more (35049)", values["..."])

        session.next()
        stopped = session.wait_stopped(timeout=60)
        check(stopped.get("reason") == "step", "next: reason step", stopped)
        check(stopped["description"].startswith("backward: grad of ") and "(softmax)" not in stopped["description"],
              "next: the next backward group", stopped)
        session.step_back()
        stopped = session.wait_stopped(timeout=60)
        check(stopped.get("description") == "rewound 1 back: backward: grad of att (softmax)",
              "stepBack: attention's softmax again, rewound 1 back", stopped)
        frames = session.stack_trace()
        top_frame_checks(frames[0], "grad of att (softmax)", MODEL, SOFTMAX_LINE)
        again = check_grad_output(session, session.stop_scope(frames[0]["id"]))
        check(again == before, "rewound: grad_output's values as they were", again[:4], before[:4])
        session.disconnect(timeout=5)


def case_fwd_softmax_library_frames(context):
    with tempfile.TemporaryDirectory() as tmp:
        session = context.session()
        session.start_program(TINY_GPT, ["--steps", "1"], cwd=tmp, function_breakpoints=["fwd softmax"])
        stopped = session.wait_stopped(timeout=120)
        check(stopped["description"] == "forward: softmax(att)", "description 'forward: softmax(att)' (named as the banner names it, the op once)", stopped)
        frames = session.stack_trace()
        top_frame_checks(frames[0], "softmax(att)", MODEL, SOFTMAX_LINE)
        check(frames[1].get("line") == SOFTMAX_LINE and (frames[1].get("source") or {}).get("path") == MODEL,
              "then attention's forward, at the softmax line", frames[1])
        library = [f for f in frames if not (f.get("source") or {}).get("path")]
        check(len(library) >= 3, "nn's module calls (attention, block, model) are among the frames", frames)
        for frame in library:
            check(frame.get("presentationHint") == "subtle" and "nn.lua" in (frame.get("source") or {}).get("name", ""),
                  "a library frame: source.name only (nn.lua), presentationHint subtle", frame)
        check(frames[-1].get("name") == "main chunk" and frames[-1].get("line") == STEP_CALL_LINE,
              "the outermost frame: the main chunk at step(x, y)", frames[-1])
        session.disconnect(timeout=5)


if __name__ == "__main__":
    run_cases(globals(), sys.argv)
