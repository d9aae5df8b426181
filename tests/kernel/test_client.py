"""The tapedeck kernel driven by a real Jupyter client (jupyter_client), as a notebook drives it:

  - the stepper inline: a breakpoint inside backward, `:step` three times through Jupyter's input
    prompt, then `:continue`; each move updates the same picture in place (one display_id);
  - interrupts: a running training loop stops with a clear error and the kernel keeps its state;
    an interrupt while idle or at the (tdb) prompt does not hurt it;
  - bad input: a malformed message, an unknown message type, a cell that errors, a client that
    disappears at a stop: the kernel keeps running and keeps its state;
  - the round trips (trivial cell, tiny GPT's graph, one stepper move), printed, not asserted.

    python3 tests/kernel/test_client.py build/tapedeck
"""
import os
import sys
import time

from kernel_env import finish, install_kernelspec

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
failures = []


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        failures.append(what)


class Cell:
    """What one execute_request brought back: iopub messages of this request, input prompts, the reply."""

    def __init__(self, kc, code, answers=None, timeout=60, interrupt_after=None, km=None):
        self.messages, self.prompts = [], []
        msg_id = kc.execute(code, allow_stdin=answers is not None, stop_on_error=False)
        answers = list(answers or [])
        deadline, interrupted = time.time() + timeout, False
        while time.time() < deadline:
            if interrupt_after is not None and not interrupted and time.time() > deadline - timeout + interrupt_after:
                km.interrupt_kernel()
                interrupted = True
            if answers or self.prompts:
                try:
                    m = kc.get_stdin_msg(timeout=0.02)
                    self.prompts.append(m["content"]["prompt"])
                    answer = answers.pop(0) if answers else ":continue"
                    if answer is None:   # leave the prompt unanswered: the caller interrupts it
                        return
                    kc.input(answer)
                    continue
                except Exception:
                    pass
            try:
                m = kc.get_iopub_msg(timeout=0.02)
            except Exception:
                continue
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                break
            self.messages.append(m)
        self.reply = kc.get_shell_msg(timeout=10)["content"]

    def of(self, kind):
        return [m["content"] for m in self.messages if m["msg_type"] == kind]

    def stdout(self):
        return "".join(c["text"] for c in self.of("stream") if c["name"] == "stdout")

    def result(self):
        results = self.of("execute_result")
        return results[0]["data"]["text/plain"] if results else None


def test_stepper(kc):
    Cell(kc, "torch.manual_seed(0)\nx = torch.randn(3, 1, {requires_grad = true})\n"
             "W = torch.randn(3, 3, {requires_grad = true})\nb = torch.randn(3, 1, {requires_grad = true})\n"
             "z = W:mm(x) * 2 + b\nh = z:tanh()\nloss = (h * h):sum()")
    Cell(kc, ":break bwd tanh")
    cell = Cell(kc, "loss:backward()", answers=[":step", ":step", ":step", ":continue"])
    check(cell.reply["status"] == "ok", "stepper: the cell ends ok after :continue")
    check(cell.prompts == ["(tdb) "] * 4, "stepper: four (tdb) prompts through Jupyter's input (%r)" % cell.prompts)
    shown = cell.of("display_data")
    updates = cell.of("update_display_data")
    check(len(shown) == 1, "stepper: one picture shown at the first stop")
    ids = {c["transient"]["display_id"] for c in shown + updates}
    check(len(ids) == 1, "stepper: every update replaces that same picture (one display_id)")
    check(len(updates) == 3, "stepper: three :step moves, three updates in place (%d)" % len(updates))
    svgs = [c["data"]["image/svg+xml"] for c in shown + updates]
    check(all("#d62728" in s for s in svgs), "stepper: each picture marks the stopped node in red")
    check(len(set(svgs)) == len(svgs), "stepper: each move draws a different picture")
    out = cell.stdout()
    check("[breakpoint 1] backward" in out and out.count("[step] backward") == 3,
          "stepper: the stop's banner and one per :step, as in the terminal")
    grad = Cell(kc, "x.grad:size(1)").result()
    check(grad == "3", "stepper: after :continue the gradients are there (x.grad has 3 rows)")
    Cell(kc, ":delete all")


def test_stop_picture_of_a_long_graph(kc):
    """On a graph larger than a picture can show, the stop draws the nodes nearest the stopped one."""
    Cell(kc, "u = torch.randn(4, {requires_grad = true})\nv = u\nfor i = 1, 40 do v = (v * 1.01):tanh() end\n"
             "mid = v\nfor i = 1, 40 do v = (v * 1.01):sin() end\nlong_loss = v:sum()")
    mid = Cell(kc, "mid.node").result()
    Cell(kc, ":break bwd node " + mid)
    cell = Cell(kc, "long_loss:backward()", answers=[":continue"])
    shown = cell.of("display_data")
    check(len(shown) == 1 and "nodes nearest the stop" in shown[0]["data"]["text/plain"],
          "a long graph: the stop's picture is the neighbourhood of the stop (%r)" % [c["data"].get("text/plain") for c in shown])
    svg = shown[0]["data"].get("image/svg+xml", "") if shown else ""
    check(svg.count('class="node"') <= 70 and "#d62728" in svg, "a long graph: at most 60 nodes drawn (and stubs), the stop marked")
    Cell(kc, ":delete all")


def test_live_output(kc):
    cell = Cell(kc, "for i = 1, 3 do\n  print('step', i)\n  local t = os.clock()\n  while os.clock() - t < 0.3 do end\nend")
    texts = [c["text"] for c in cell.of("stream")]
    check(len(texts) == 3 and texts[0] == "step\t1\n",
          "live output: each print of a loop reaches the notebook as it runs, not at the cell's end (%r)" % texts)


def test_interrupts(km, kc):
    Cell(kc, "kept = 41")
    cell = Cell(kc, "local n = 0\nwhile true do n = n + 1 end", interrupt_after=1.0, km=km, timeout=30)
    check(cell.reply["status"] == "error" and cell.reply["ename"] == "Interrupted",
          "interrupt: a running loop stops as an 'Interrupted' error (%s)" % cell.reply.get("ename"))
    check("keeps its state" in cell.reply.get("evalue", ""), "interrupt: the message says the state is kept")
    check(Cell(kc, "kept + 1").result() == "42", "interrupt: the kernel keeps its globals")
    km.interrupt_kernel()   # while idle: nothing to stop
    time.sleep(0.5)
    check(Cell(kc, "kept").result() == "41", "interrupt while idle: the kernel goes on")
    Cell(kc, "a = torch.randn(2, {requires_grad = true})\nb = a:tanh():sum()\n:break bwd tanh")
    cell = Cell(kc, "b:backward()", answers=[None])   # the prompt stays unanswered
    time.sleep(0.3)
    km.interrupt_kernel()
    reply = kc.get_shell_msg(timeout=20)["content"]
    check(reply["status"] in ("ok", "error"), "interrupt at the (tdb) prompt: the cell ends")
    Cell(kc, ":delete all")
    check(Cell(kc, "kept").result() == "41", "interrupt at the (tdb) prompt: the kernel keeps its state")


def test_bad_input(km, kc):
    session = kc.session
    kc.shell_channel.socket.send_multipart([b"<IDS|MSG>", b"not a signature", b"{", b"}", b"{}", b"{"])
    time.sleep(0.3)
    msg = session.msg("no_such_request", {})
    kc.shell_channel.send(msg)
    time.sleep(0.3)
    check(km.is_alive() and Cell(kc, "1 + 1").result() == "2", "bad input: malformed and unknown messages leave the kernel running")
    cell = Cell(kc, "y = 5\nerror('planned')\ny = 6")
    check(cell.reply["status"] == "error" and Cell(kc, "y").result() == "5",
          "bad input: a cell that errors stops there, the kernel keeps what ran before")
    cell = Cell(kc, ":graph no_such_tensor")
    check(cell.reply["status"] == "ok" and "nil" in "".join(c["text"] for c in cell.of("stream")),
          "bad input: a ':' command's error is said on the cell's stream")


def new_client(km):
    """A client of its own, as another frontend is: a new session (a ZeroMQ identity of its own)."""
    import jupyter_client.session
    return km.client(session=jupyter_client.session.Session(key=km.session.key))


def test_client_disappears(km):
    kc = new_client(km)
    kc.start_channels()
    kc.wait_for_ready(timeout=30)
    Cell(kc, "c = torch.randn(2, {requires_grad = true})\nd = c:tanh():sum()\n:break bwd tanh")
    kc.execute("d:backward()", allow_stdin=True)
    prompt = kc.get_stdin_msg(timeout=60)["content"]["prompt"]   # the kernel waits at the stop
    check(prompt == "(tdb) ", "a client that disappears: the kernel asked it for a debugger command")
    kc.stop_channels()                 # the frontend goes away with the kernel at the (tdb) prompt
    km.interrupt_kernel()              # what a new frontend does first: Interrupt
    kc = new_client(km)
    kc.start_channels()
    # Not wait_for_ready: a request that came while the interrupted cell ended is answered
    # {'status': 'error'} (the cell erred, and Jupyter aborts what was queued behind it), and
    # jupyter_client's wait_for_ready takes that kernel_info_reply for a real one (KeyError).
    for _ in range(60):
        kc.kernel_info()
        try:
            reply = kc.get_shell_msg(timeout=1)
        except Exception:
            continue
        if reply["msg_type"] == "kernel_info_reply" and "protocol_version" in reply["content"]:
            break
        time.sleep(0.2)   # xeus goes on aborting while requests come within 50 ms of each other
    check(reply["content"].get("implementation") == "tapedeck", "a client that disappears at a stop: a new client is answered")
    check(Cell(kc, "c:size(1)").result() == "2", "a client that disappears at a stop: a new one finds the kernel and its state")
    return kc


def measure(kc):
    t = time.perf_counter()
    for _ in range(20):
        Cell(kc, "1")
    trivial = (time.perf_counter() - t) / 20
    Cell(kc, "gpt = dofile('%s/scripts/models/tiny_gpt_model.lua')\ntorch.manual_seed(0)\n"
             "model = gpt.GPT(gpt.config{vocab_size = 65, block_size = 32, n_layer = 2, n_head = 4, n_embd = 32})\n"
             "idx = torch.randint(1, 66, {16, 32})\n_, loss = model(idx, torch.randint(1, 66, {16, 32}))\n"
             "loss:backward()" % REPO, timeout=120)
    t = time.perf_counter()
    cell = Cell(kc, "torch.graph(loss)", timeout=120)
    gpt = time.perf_counter() - t
    shown = "image/svg+xml" in (cell.of("execute_result") or [{"data": {}}])[0]["data"]
    Cell(kc, "p = torch.randn(4, 4, {requires_grad = true})\nq = p:tanh():sum()\n:break bwd tanh")
    t = time.perf_counter()
    Cell(kc, "q:backward()", answers=[":continue"])
    move = time.perf_counter() - t
    print("figures: trivial cell %.1f ms; tiny_gpt graph inline %.0f ms (svg: %s); a stop shown and answered %.0f ms"
          % (trivial * 1e3, gpt * 1e3, shown, move * 1e3))


if __name__ == "__main__":
    install_kernelspec(sys.argv[1])
    import jupyter_client
    km = jupyter_client.KernelManager(kernel_name="tapedeck")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=30)
    try:
        test_stepper(kc)
        test_stop_picture_of_a_long_graph(kc)
        test_live_output(kc)
        test_interrupts(km, kc)
        test_bad_input(km, kc)
        kc.stop_channels()
        kc = test_client_disappears(km)
        if "--measure" in sys.argv:
            measure(kc)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)
    print("%d failure(s)" % len(failures))
    finish(bool(failures))
