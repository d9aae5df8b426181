#!/usr/bin/env python3
"""test_notebooks.py TAPEDECK SOURCE_DIR [--write]: every lesson notebook in scripts/notebooks/,
executed by nbclient on the tapedeck kernel, shows what it teaches.

The kernelspec is installed from TAPEDECK into a temporary prefix (`--install-kernel --prefix`), so
the test runs the build's kernel and nothing else the machine has installed. Each notebook runs
headless, as nbconvert --execute does: the frontend cannot answer the debugger's `(tdb)` prompt, so
every stop shows its banner and picture and continues. The checks:

- no error output, except in the cells tagged `raises-exception` (they must err, and the error
  names the cell and line);
- the MIME types where they are expected: image/svg+xml for graphs, image/png for :plot,
  text/html for tensors, the stop pictures' display_data and update_display_data (one display
  id per cell, the stopped node outlined in red);
- the numbers a lesson prints equal those of the same code run as a script (scripts/*.lua, or
  `tapedeck -e`), to the printed digits. Timings (`:timeit`) are never compared.

--write also writes the executed notebooks back over scripts/notebooks/*.ipynb, with their
outputs: how the committed outputs are made.

Exit 77 (ctest: skipped) when this python3 lacks nbclient or jupyter_client, or TAPEDECK was built
without the kernel.
"""
import base64
import glob
import os
import re
import subprocess
import sys
import tempfile

SKIP = 77
CELL_TIMEOUT = 240   # seconds per cell: the slowest (the training loop, :timeit) take a few on a loaded machine

try:
    import jupyter_client  # noqa: F401  (nbclient's own dependency: named for the skip message)
    import nbclient
    import nbformat
except ImportError as missing:
    print(f"skipped: this python3 ({sys.executable}) cannot import {missing.name} "
          "(Debian: apt-get install python3-nbclient python3-jupyter-client)")
    sys.exit(SKIP)


class RecordingClient(nbclient.NotebookClient):
    """nbclient's client, noting each cell's display messages (type, display id, MIME types): the
    notebook keeps an updated picture only as its last state, the test wants every update."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.messages = {}   # cell index -> [(msg_type, display_id, [mime types])]

    def process_message(self, msg, cell, cell_index):
        kind = msg["msg_type"]
        if kind in ("display_data", "update_display_data", "execute_result"):
            content = msg["content"]
            display_id = content.get("transient", {}).get("display_id")
            self.messages.setdefault(cell_index, []).append((kind, display_id, sorted(content.get("data", {}))))
        return super().process_message(msg, cell, cell_index)


class Lesson:
    """One executed notebook: its cells found by their source, their outputs as text."""

    def __init__(self, path, notebook, messages):
        self.path = path
        self.name = os.path.basename(path)
        self.notebook = notebook
        self.messages = messages
        self.code = [(i, c) for i, c in enumerate(notebook.cells) if c.cell_type == "code"]

    def cell(self, source_part):
        """The index and cell of the one code cell whose source holds `source_part`."""
        found = [(i, c) for i, c in self.code if source_part in c.source]
        check(len(found) == 1, f"{self.name}: {len(found)} code cells hold {source_part!r} (want 1)")
        return found[0]

    def text(self, cell, stream="stdout"):
        return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == stream)

    def outputs_with(self, cell, mime, kinds=("execute_result", "display_data")):
        return [o for o in cell.outputs if o.output_type in kinds and mime in o.get("data", {})]


failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL: " + what)
    return condition


def lines_starting(text, prefixes):
    """The lines of `text` that start with one of `prefixes`, in order."""
    return [line.rstrip() for line in text.splitlines() if line.startswith(tuple(prefixes))]


def run_tapedeck(tapedeck, args, cwd):
    result = subprocess.run([tapedeck, *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"{tapedeck} {' '.join(args)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return result.stdout


def execute(path, workdir):
    """Run the notebook at `path` from clean outputs; returns the executed Lesson."""
    notebook = nbformat.read(path, as_version=4)
    for _, cell in [(i, c) for i, c in enumerate(notebook.cells) if c.cell_type == "code"]:
        cell.outputs, cell.execution_count = [], None
    client = RecordingClient(notebook, kernel_name="tapedeck", timeout=CELL_TIMEOUT, record_timing=False,
                             resources={"metadata": {"path": workdir}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as error:   # a cell erred that is not tagged to
        check(False, f"{os.path.basename(path)}: {error}")
    except Exception as error:   # the kernel died or timed out: the rest cannot be checked
        check(False, f"{os.path.basename(path)}: {type(error).__name__}: {error}")
        return None
    return Lesson(path, notebook, client.messages)


def check_errors(lesson):
    """Errors only where a cell is tagged to raise, and each names its cell and line."""
    for _, cell in lesson.code:
        errors = [o for o in cell.outputs if o.output_type == "error"]
        tagged = "raises-exception" in cell.metadata.get("tags", [])
        head = cell.source.splitlines()[0] if cell.source else ""
        if tagged:
            check(errors, f"{lesson.name}: the cell {head!r} should raise and did not")
            for e in errors:
                check(f"cell {cell.execution_count}, line " in e.evalue,
                      f"{lesson.name}: the error {e.evalue!r} does not name cell {cell.execution_count}")
        else:
            check(not errors, f"{lesson.name}: the cell {head!r} erred: {[e.evalue for e in errors]}")


def check_svg(lesson, output, what, marked):
    svg = output.data.get("image/svg+xml", "")
    check("<svg" in svg, f"{lesson.name}: {what}: no SVG picture")
    red = 'stroke="#d62728"' in svg
    check(red == marked, f"{lesson.name}: {what}: the stopped node {'is not' if marked else 'should not be'} outlined in red")


def check_stop_pictures(lesson, index, stops, what):
    """The cell's stop picture: one display_data with a display id, then one update_display_data
    of the same id per further stop, each an SVG with the stopped node in red."""
    displays = [m for m in lesson.messages.get(index, []) if m[0] in ("display_data", "update_display_data")]
    kinds = [m[0] for m in displays]
    check(kinds == ["display_data"] + ["update_display_data"] * (stops - 1),
          f"{lesson.name}: {what}: display messages {kinds}, want one display_data and {stops - 1} updates")
    check(len({m[1] for m in displays}) == 1 and displays and displays[0][1],
          f"{lesson.name}: {what}: the stop pictures do not share one display id: {[m[1] for m in displays]}")
    check(all("image/svg+xml" in m[2] for m in displays), f"{lesson.name}: {what}: a stop picture is not SVG")
    shown = lesson.outputs_with(lesson.notebook.cells[index], "image/svg+xml", ("display_data",))
    if check(len(shown) == 1, f"{lesson.name}: {what}: {len(shown)} stop pictures kept in the notebook (want 1)"):
        check_svg(lesson, shown[0], what, marked=True)


def check_lesson_01(lesson, tapedeck, root, workdir):
    i, cell = lesson.cell("loss = next_h:sum()\nloss")
    result = lesson.outputs_with(cell, "text/html", ("execute_result",))
    if check(result, "01: the lecture cell's tensor has no text/html"):
        check(result[0].data["text/plain"].startswith("tensor(-2.4613"), "01: the lecture cell's loss is not -2.4613")
    i, cell = lesson.cell("torch.graph(loss)")
    graphs = lesson.outputs_with(cell, "image/svg+xml", ("execute_result",))
    if check(graphs, "01: torch.graph(loss) shows no SVG"):
        check_svg(lesson, graphs[0], "torch.graph(loss)", marked=False)
    for source in ("two = rnn_unrolled(2)", "three = rnn_unrolled(3)"):
        i, cell = lesson.cell(source)
        check(lesson.outputs_with(cell, "image/svg+xml", ("execute_result",)), f"01: {source}: no SVG graph")

    # The stop inside backward: its banner, its picture, and headless, the note that it continues.
    i, cell = lesson.cell("loss:backward()\n\nlocal function norm")
    out = lesson.text(cell)
    check("[breakpoint 1] backward" in out and "grad of next_h (#10 tanh)" in out, "01: no stop at tanh's gradient")
    check("cannot answer the debugger's prompt: continuing" in out, "01: the headless stop does not say it continues")
    check_stop_pictures(lesson, i, 1, "the stop at tanh")
    script = run_tapedeck(tapedeck, [os.path.join(root, "scripts/rnn_cell.lua"), os.path.join(workdir, "rnn_cell.svg")], root)
    prefixes = ("loss ", "|dloss/dW_h|", "|dloss/dW_x|")
    check(lines_starting(out, prefixes) == lines_starting(script, prefixes) and lines_starting(script, prefixes),
          f"01: the cell's numbers {lines_starting(out, prefixes)} are not scripts/rnn_cell.lua's {lines_starting(script, prefixes)}")

    i, cell = lesson.cell('dbg.command(":gradcheck")')
    out = lesson.text(cell)
    check("ok: grad_input agrees with finite differences" in out and "MISMATCH: grad_input differs" in out,
          "01: :gradcheck at the scripted stop does not say ok, then MISMATCH after the edit")

    # The graph's size per length: the notebook's function and loop, run as a script.
    _, function_cell = lesson.cell("function rnn_unrolled(steps)")
    i, cell = lesson.cell("steps: %4d nodes")
    function_source = function_cell.source.split("\ntwo = ")[0]
    script = run_tapedeck(tapedeck, ["-e", function_source, "-e", cell.source], root)
    check(re.search(r"100 steps:\s+806 nodes", script) and lesson.text(cell) == script,
          f"01: the graph sizes {lesson.text(cell)!r} are not those of the same code run as a script: {script!r}")

    # Backward through time: three stops in one cell, one picture updated in place.
    i, cell = lesson.cell("three.loss:backward()")
    out = lesson.text(cell)
    ids = [int(n) for n in re.findall(r"\] backward #\d+  grad of #(\d+) tanh", out)]
    check(len(ids) == 3 and ids == sorted(ids, reverse=True), f"01: the three tanh stops are not in reverse order: {ids}")
    check_stop_pictures(lesson, i, 3, "backward through time")
    script = run_tapedeck(tapedeck, [os.path.join(root, "scripts/rnn_unrolled.lua"), "3"], root)
    check(lines_starting(out, prefixes) == lines_starting(script, prefixes),
          f"01: the unrolled cell's numbers {lines_starting(out, prefixes)} are not scripts/rnn_unrolled.lua 3's {lines_starting(script, prefixes)}")


def check_lesson_02(lesson, tapedeck, root, workdir):
    i, cell = lesson.cell("model = spiral.model(100, 3)")
    result = [o for o in cell.outputs if o.output_type == "execute_result"]
    check(result and result[0].data["text/plain"].startswith("Sequential("), "02: the model does not show as its tree")

    i, cell = lesson.cell("train_step = spiral.train_step")
    out = lesson.text(cell)
    script = run_tapedeck(tapedeck, [os.path.join(root, "scripts/models/spiral_mlp.lua"), "--steps", "300",
                                     "--out", os.path.join(workdir, "spiral.png")], root)
    progress = [re.match(r"step \d+/\d+  loss \S+", line).group(0) for line in lines_starting(script, ("step ",))]
    check(progress and lines_starting(out, ("step ",)) == progress,
          f"02: the losses {lines_starting(out, ('step ',))} are not scripts/models/spiral_mlp.lua's {progress}")
    check(lines_starting(out, ("training accuracy",)) == lines_starting(script, ("training accuracy",)),
          "02: the training accuracy is not the script's")

    for name in ("loss", "flow", "grad_norm"):
        i, cell = lesson.cell(f":plot {name}")
        pictures = lesson.outputs_with(cell, "image/png", ("display_data",))
        if check(pictures, f"02: :plot {name} shows no PNG"):
            check(base64.b64decode(pictures[0].data["image/png"])[:8] == b"\x89PNG\r\n\x1a\n",
                  f"02: :plot {name}: not a PNG")

    i, cell = lesson.cell("the bug: log of the scores")
    raised = cell.execution_count
    errors = [o for o in cell.outputs if o.output_type == "error"]
    check(errors and f"cell {raised}, line 7: step 1: the loss is NaN" in errors[0].evalue,
          f"02: the planted NaN's error does not name cell {raised}, line 7")
    i, cell = lesson.cell(":why loss")
    out = lesson.text(cell)
    check(re.search(rf"origin\s+forward .*log\s+\(cell {raised}:6\)", out) is not None,
          f"02: :why does not name the log on line 6 of cell {raised}: {out!r}")
    check("log of a negative number is NaN" in out, "02: :why does not say the log's input was negative")
    i, cell = lesson.cell("nll_loss(log_softmax)")
    values = re.findall(r"(-?\d+\.\d+)", lesson.text(cell))
    check(len(values) == 2 and values[0] == values[1], f"02: the fixed loss is not the cross-entropy: {values}")


def check_lesson_03(lesson, tapedeck, root, workdir):
    passes_lesson = os.path.join(root, "tests/repl/passes_lesson.lua")
    script = run_tapedeck(tapedeck, ["-e", f'dofile("{passes_lesson}")', "-e", """
f = torch.freeze(lesson, x)
print(f:passes().text)
w.grad = nil
print(("eager   %.6f"):format(lesson(x):item()))
w.grad = nil
print(("frozen  %.6f"):format(f(x):item()))"""], root)
    i, cell = lesson.cell(":plan f --passes")
    summary = lambda text: [line for line in text.splitlines() if re.match(r"(dce|cse|fold|fuse|inplace|reuse) ", line)]
    check(summary(lesson.text(cell)) and summary(lesson.text(cell)) == summary(script),
          f"03: :plan f --passes {summary(lesson.text(cell))} is not the script's {summary(script)}")
    i, cell = lesson.cell("eager_grad = w.grad:clone()")
    out = lesson.text(cell)
    prefixes = ("eager ", "frozen ")
    check(lines_starting(out, prefixes) == lines_starting(script, prefixes) and lines_starting(out, prefixes),
          f"03: eager and frozen {lines_starting(out, prefixes)} are not the script's {lines_starting(script, prefixes)}")
    check(re.search(r"max \|w.grad eager - frozen\|\s+0$", out, re.M) is not None, "03: the frozen w.grad differs from eager")

    for source in (":timeit f 1000", ":timeit rnn_frozen"):
        i, cell = lesson.cell(source)
        tables = lesson.outputs_with(cell, "text/html", kinds=("display_data",))
        out = tables[0]["data"]["text/plain"] if tables else ""
        check("speedup" in out and re.search(r"max \|diff\| 0 ", out) is not None,
              f"03: {source}: no speedup line, or eager and frozen differ: {out!r}")
        check(bool(tables) and "<table>" in tables[0]["data"]["text/html"], f"03: {source}: no table of the timings")

    i, cell = lesson.cell("rnn_frozen = torch.freeze(rnn_step, xs)")
    script = run_tapedeck(tapedeck, [os.path.join(root, "scripts/rnn_unrolled.lua"), "50"], root)
    prefixes = ("loss ", "|dloss/dW_h|", "|dloss/dW_x|")
    check(lines_starting(lesson.text(cell), prefixes) == lines_starting(script, prefixes),
          f"03: the frozen loop's numbers are not scripts/rnn_unrolled.lua 50's: {lines_starting(lesson.text(cell), prefixes)}")
    i, cell = lesson.cell(":plan rnn_frozen --passes")
    check(re.search(r"fuse\s+50 groups", lesson.text(cell)) is not None, "03: the 50 steps' add and tanh are not fused")
    i, cell = lesson.cell("loss60 = rnn_frozen(")
    check("re-recording" in lesson.text(cell, "stderr") and "the plan expects [50,10]" in lesson.text(cell, "stderr"),
          "03: a 60-row input does not say which guard failed")


CHECKS = {
    "01_static_vs_dynamic.ipynb": check_lesson_01,
    "02_training_loop.ipynb": check_lesson_02,
    "03_freeze.ipynb": check_lesson_03,
}


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: test_notebooks.py TAPEDECK SOURCE_DIR [--write]")
    tapedeck, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    write = "--write" in sys.argv[3:]
    lessons_dir = os.path.join(root, "scripts/notebooks")
    paths = sorted(glob.glob(os.path.join(lessons_dir, "*.ipynb")))
    check(sorted(map(os.path.basename, paths)) == sorted(CHECKS), f"the lessons are {paths}, the checks {sorted(CHECKS)}")

    with tempfile.TemporaryDirectory(prefix="tapedeck-notebooks-") as workdir:
        install = subprocess.run([tapedeck, "--install-kernel", "--prefix", os.path.join(workdir, "prefix")],
                                 capture_output=True, text=True)
        if install.returncode != 0:
            if "no Jupyter kernel" in install.stderr:
                print("skipped: " + install.stderr.strip())
                sys.exit(SKIP)
            sys.exit(f"--install-kernel failed:\n{install.stdout}{install.stderr}")
        # Only this kernelspec, and the connection files in the temporary folder.
        os.environ["JUPYTER_PATH"] = os.path.join(workdir, "prefix/share/jupyter")
        os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(workdir, "runtime")
        for variable in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):   # the sanitizer build: the kernel's reports to files
            if variable in os.environ:
                os.environ[variable] += ":log_path=" + os.path.join(workdir, "sanitizer")
        for path in paths:
            lesson = execute(path, lessons_dir)
            if lesson is None:
                continue
            check_errors(lesson)
            CHECKS.get(lesson.name, lambda *a: None)(lesson, tapedeck, root, workdir)
            if write:
                nbformat.write(lesson.notebook, path)
                print(f"wrote {path}")
        for report in sorted(glob.glob(os.path.join(workdir, "sanitizer*"))):
            with open(report, errors="replace") as f:
                check(False, f"a sanitizer reported on the kernel:\n{f.read()}")
    if failures:
        print(f"{len(failures)} checks failed")
        return 1
    print(f"ok: {len(paths)} lessons")
    return 0


if __name__ == "__main__":
    sys.exit(main())
