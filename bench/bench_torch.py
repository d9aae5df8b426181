#!/usr/bin/env python3
"""bench_torch.py: the bench.lua workloads in PyTorch, eager and TorchScript, one thread.

    python3 bench_torch.py [--device cuda] SAMPLES [W1 W2 ...]

Prints one line per workload and mode: "W2 eager <min µs> <median µs>" and "W2 script <min> <median>"
(TorchScript: torch.jit.trace of the forward, then backward and the update as in eager), after a
line "blas <library>" naming the BLAS the matmuls use. `tapedeck bench` runs it when PyTorch is
installed and adds its columns. Adding a workload = one function below, named like the Lua one.
With --device cuda (tapedeck bench --device cuda) every tensor is made on the GPU
(torch.set_default_device), each timed batch ends with torch.cuda.synchronize(), and the second mode
is torch.compile ("W2 compile <min> <median>") instead of TorchScript.
"""
import sys
import time

import torch

torch.set_num_threads(1)
torch.manual_seed(0)


# Each workload: (forward, inputs, params, update). forward(*inputs, *params) returns the loss;
# one step sets the parameters' .grad to None, runs forward, then backward (unless update is
# "forward only") and the update, if any. TorchScript traces forward with the parameters as inputs
# (a captured tensor that requires grad cannot be a trace constant); backward runs as in eager.
FORWARD_ONLY = "forward only"


def w1():
    def forward(a, b):
        return a * b
    return forward, (), (torch.tensor(15.0, requires_grad=True), torch.tensor(20.0, requires_grad=True)), None


def w2():
    def forward(x, prev_h, W_h, W_x):
        return torch.tanh(W_h.mm(prev_h.t()) + W_x.mm(x.t())).sum()
    params = (torch.randn(20, 20, requires_grad=True), torch.randn(20, 10, requires_grad=True))
    return forward, (torch.randn(1, 10), torch.randn(1, 20)), params, None


def w3():
    xs = torch.randn(50, 10, 1)

    def forward(h0, xs, W_h, W_x):
        h = h0
        for t in range(50):
            h = torch.tanh(W_h.mm(h) + W_x.mm(xs[t]))
        return h.sum()
    params = (torch.randn(20, 20, requires_grad=True), torch.randn(20, 10, requires_grad=True))
    return forward, (torch.randn(20, 1), xs), params, None


def w4():
    w1 = torch.randn(1000, 100, requires_grad=True)
    w2 = torch.randn(100, 10, requires_grad=True)

    def forward(x, y, w1, w2):
        return (x.mm(w1).clamp(min=0).mm(w2) - y).pow(2).sum()

    def update():
        with torch.no_grad():
            w1.sub_(w1.grad, alpha=1e-6)
            w2.sub_(w2.grad, alpha=1e-6)
    return forward, (torch.randn(64, 1000), torch.randn(64, 10)), (w1, w2), update


def w5():
    def forward(x, y, W1, b1, W2, b2):
        pred = (x.mm(W1) + b1).relu().mm(W2) + b2
        return (pred - y).pow(2).mean()
    params = ((torch.randn(1000, 100) * 0.03).requires_grad_(), torch.zeros(100, requires_grad=True),
              (torch.randn(100, 1000) * 0.1).requires_grad_(), torch.zeros(1000, requires_grad=True))
    return forward, (torch.randn(64, 1000), torch.randn(64, 1000)), params, FORWARD_ONLY


def w6():
    conv = torch.nn.Conv2d(1, 8, 3, padding=1)
    fc = torch.nn.Linear(1568, 10)
    F = torch.nn.functional

    def forward(x, labels, conv_w, conv_b, fc_w, fc_b):
        h = F.max_pool2d(F.conv2d(x, conv_w, conv_b, padding=1).relu(), 2).reshape(8, 1568)
        return F.cross_entropy(F.linear(h, fc_w, fc_b), labels)
    params = (conv.weight, conv.bias, fc.weight, fc.bias)
    return forward, (torch.randn(8, 1, 28, 28), torch.arange(8)), params, None


def w7():
    """char_lstm.lua's training step: Embedding(71, 32), LSTM(32, 128, batch_first), Linear(128, 71),
    cross_entropy, backward, clip_grad_norm_(1.0), Adam(lr 0.01); batch 16 x 32 characters. The
    module computes the loss (TorchScript traces it, parameters included); the update clears the
    gradients after Adam's step, so the next step starts without them, as the others do."""
    F = torch.nn.functional

    class CharLSTM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(71, 32)
            self.lstm = torch.nn.LSTM(32, 128, batch_first=True)
            self.head = torch.nn.Linear(128, 71)

        def forward(self, x, y):
            out, _ = self.lstm(self.embed(x))
            return F.cross_entropy(self.head(out).reshape(-1, 71), y.reshape(-1))
    model = CharLSTM()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def update():
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return model, (torch.randint(0, 71, (16, 32)), torch.randint(0, 71, (16, 32))), (), update



def w8():
    """bench.lua's W8: one training step of the tiny GPT (tests/oracle/make_tiny_gpt_oracle.py's twin
    of scripts/models/tiny_gpt_model.lua) at tiny_gpt.lua's sizes, AdamW as nanoGPT configures it.
    TorchScript traces the model itself (forward.trace): its parameters stay the module's, not
    trace constants, so backward and AdamW update them as in eager."""
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "oracle"))
    from make_tiny_gpt_oracle import GPT
    config = dict(block_size=32, vocab_size=65, n_layer=2, n_head=4, n_embd=32, dropout=0.0, bias=True)
    model = GPT(config)
    params = tuple(p for _, p in model.named_parameters())
    optimizer = model.configure_optimizers(0.1, 1e-4, (0.9, 0.99))

    class Loss(torch.nn.Module):   # (x, y, *params) -> the loss; params are the model's own
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x, y, *params):
            return self.model(x, y)[1]

    def forward(x, y, *params):
        return model(x, y)[1]
    inputs = (torch.randint(0, 65, (16, 32)), torch.randint(0, 65, (16, 32)))
    forward.trace = lambda: torch.jit.trace(Loss(), (*inputs, *params), check_trace=False)
    return forward, inputs, params, optimizer.step


def rnn_unroll(steps, samples=None, warmup=20):
    """bench.lua's W9: the lecture's cell unrolled `steps` steps as the issue's loop writes it (h a
    [1,20] row fed back, x_t a narrow of xs), backward from the last h's sum. Not traced (a trace
    of 50,000 steps would be a 250,000-node graph); the large T take few samples of one call each."""
    xs = torch.randn(steps, 10)

    def forward(xs, W_h, W_x):
        h = torch.zeros(1, 20)
        for t in range(steps):
            h = torch.tanh(W_h.mm(h.t()) + W_x.mm(xs.narrow(0, t, 1).t())).t()
        return h.sum()
    forward.no_script = True
    forward.samples = samples
    forward.warmup = warmup
    params = ((torch.randn(20, 20) * 0.1).requires_grad_(), torch.randn(20, 10, requires_grad=True))
    return forward, (xs,), params, None


WORKLOADS = {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5, "W6": w6, "W7": w7, "W8": w8,
             "W9A": lambda: rnn_unroll(50), "W9B": lambda: rnn_unroll(5000, 5, 1), "W9C": lambda: rnn_unroll(50000, 2, 0)}


def make_step(forward, inputs, params, update):
    def step():
        if update == FORWARD_ONLY:
            return forward(*inputs, *params)
        for p in params:
            p.grad = None
        forward(*inputs, *params).backward()
        if update is not None:
            update()
    return step


DEVICE = "cpu"


def finish_queued_work():
    if DEVICE != "cpu":
        torch.cuda.synchronize()


def measure(fn, samples, warmup=20):
    for _ in range(warmup):
        fn()
    iterations = 1
    while True:
        finish_queued_work()
        t0 = time.perf_counter()
        for _ in range(iterations):
            fn()
        finish_queued_work()
        if time.perf_counter() - t0 > 0.02:
            break
        iterations *= 2
    times = []
    for _ in range(samples):
        finish_queued_work()
        t0 = time.perf_counter()
        for _ in range(iterations):
            fn()
        finish_queued_work()
        times.append((time.perf_counter() - t0) / iterations * 1e6)
    times.sort()
    return times[0], times[len(times) // 2]


def blas_in_use():
    """The BLAS library torch's matmuls went to (read from this process's mappings)."""
    torch.randn(8, 8).mm(torch.randn(8, 8))
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if "blas" in line.lower():
                    return line.split()[-1]
    except OSError:
        pass
    return "unknown"


def main():
    global DEVICE
    argv = sys.argv[1:]
    if argv[:1] == ["--device"]:
        DEVICE, argv = argv[1], argv[2:]
    if DEVICE != "cpu":
        torch.set_default_device(DEVICE)
        print(f"gpu {torch.cuda.get_device_name()}", flush=True)
    samples = int(argv[0]) if argv else 25
    wanted = [n.upper() for n in argv[1:]] or list(WORKLOADS)
    names = [n for n in WORKLOADS if n in wanted or n.rstrip("ABC") in wanted]   # W9: W9A, W9B and W9C
    print(f"torch {torch.__version__}", flush=True)
    print(f"blas {blas_in_use()}", flush=True)
    for name in names:
        forward, inputs, params, update = WORKLOADS[name]()
        lo, mid = measure(make_step(forward, inputs, params, update), getattr(forward, "samples", None) or samples,
                          getattr(forward, "warmup", 20))
        print(f"{name} eager {lo:.3f} {mid:.3f}", flush=True)
        if DEVICE != "cpu":
            try:
                compiled = torch.compile(forward)
                lo, mid = measure(make_step(compiled, inputs, params, update), samples)
                print(f"{name} compile {lo:.3f} {mid:.3f}", flush=True)
            except Exception as error:  # noqa: BLE001 -- say so, skip
                print(f"# {name}: torch.compile failed: {error}", file=sys.stderr)
            continue
        if getattr(forward, "no_script", False):
            continue
        try:
            if hasattr(forward, "trace"):   # a workload that traces a module of its own
                traced = forward.trace()
            else:
                traced = torch.jit.trace(forward, (*inputs, *params), check_trace=False)
        except Exception as error:  # noqa: BLE001 -- a workload that cannot be traced: say so, skip
            print(f"# {name}: torch.jit.trace failed: {error}", file=sys.stderr)
            continue
        lo, mid = measure(make_step(traced, inputs, params, update), samples)
        print(f"{name} script {lo:.3f} {mid:.3f}", flush=True)


if __name__ == "__main__":
    main()
