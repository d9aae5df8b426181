#!/usr/bin/env python3
"""bench_torch.py: the bench.lua workloads in PyTorch, one thread: eager, TorchScript and torch.compile.

    python3 bench_torch.py [--device cuda] [--modes eager,script,compile] SAMPLES [W1 W2 ...]
    python3 bench_torch.py --serve [--device cuda]        (what `tapedeck bench` runs)

The command line, the output ("W2 eager <min µs> <median µs>" lines after "torch <version>" and
"blas <library>") and the served protocol are peer_serve.py's. Modes:
  eager    the step as a PyTorch user writes it: forward, loss.backward(), the update
  script   TorchScript: torch.jit.trace of the forward (the parameters as inputs, or the model
           itself), then backward and the update as in eager
  compile  torch.compile of the same forward (inductor; on the CPU it compiles C++ with the
           system compiler), backward and the update as in eager; the compile happens in the
           warm-up, so it is not timed (W10A times it: the lecture slide's first 10 calls)
With --device cuda every tensor is made on the GPU (torch.set_default_device) and each timed
sample ends with torch.cuda.synchronize(). Adding a workload = one function below, named like the
Lua one, and one entry in WORKLOADS.
"""
import os
import re
import sys

import warnings

import torch

from peer_serve import ColdStep, Framework, Step, Unsupported, main

torch.set_num_threads(1)
torch.manual_seed(0)
warnings.filterwarnings("ignore", message=r".*torch\.jit\.trace.* is deprecated")   # TorchScript is a column here


# Each workload: (forward, inputs, params, update). forward(*inputs, *params) returns the loss;
# one step sets the parameters' .grad to None, runs forward, then backward (unless update is
# "forward only") and the update, if any. TorchScript traces forward with the parameters as inputs
# (a captured tensor that requires grad cannot be a trace constant); backward runs as in eager.
# Optional attributes of forward: trace (a function returning its own trace), not_static (why it
# is neither traced nor compiled), warmup (calls before timing), calls (calls per sample), cold
# (time the first 10 calls of a newly made function instead: ColdStep).
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


def rnn_unroll(steps, warmup=20):
    """bench.lua's W9: the lecture's cell unrolled `steps` steps as the issue's loop writes it (h a
    [1,20] row fed back, x_t a narrow of xs), backward from the last h's sum. Neither traced nor
    compiled (a trace of 50,000 steps would be a 250,000-node graph); tapedeck asks the large T
    for few samples, and their warm-up is short (one call takes seconds)."""
    xs = torch.randn(steps, 10)

    def forward(xs, W_h, W_x):
        h = torch.zeros(1, 20)
        for t in range(steps):
            h = torch.tanh(W_h.mm(h.t()) + W_x.mm(xs.narrow(0, t, 1).t())).t()
        return h.sum()
    forward.not_static = f"not traced: a {steps}-step Python loop (a {5 * steps}-node graph)"
    forward.warmup = warmup
    params = ((torch.randn(20, 20) * 0.1).requires_grad_(), torch.randn(20, 10, requires_grad=True))
    return forward, (xs,), params, None


class SlideModel(torch.nn.Module):
    """The lecture's tf.function slide in PyTorch: Dense(H, relu) then Dense(D) is
    Linear(D, H), ReLU, Linear(H, D); forward returns the MSE loss against y (N, D, H = 64, 1000, 100)."""

    def __init__(self):
        super().__init__()
        self.model = torch.nn.Sequential(torch.nn.Linear(1000, 100), torch.nn.ReLU(), torch.nn.Linear(100, 1000))

    def forward(self, x, y):
        return torch.nn.functional.mse_loss(self.model(x), y)


def w10(cold):
    """The slide's experiment: the model's forward pass and loss, timed as timeit(number=10) times
    it. W10A (cold): each sample makes the static function anew (trace or compile) and times its
    first 10 calls, as the slide's static run did; W10B: 10 calls a sample, after the warm-up."""
    model = SlideModel()

    def forward(x, y):
        return model(x, y)
    forward.trace = lambda: torch.jit.trace(model, inputs, check_trace=False)
    forward.module = model
    forward.cold = cold
    forward.calls = 10
    inputs = (torch.randn(64, 1000), torch.randn(64, 1000))
    return forward, inputs, (), FORWARD_ONLY


WORKLOADS = {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5, "W6": w6, "W7": w7, "W8": w8,
             "W9A": lambda: rnn_unroll(50), "W9B": lambda: rnn_unroll(5000, 1), "W9C": lambda: rnn_unroll(50000, 0),
             "W10A": lambda: w10(cold=True), "W10B": lambda: w10(cold=False)}


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


def traced_forward(forward, inputs, params):
    """TorchScript's forward: the workload's own trace, or torch.jit.trace of forward."""
    if hasattr(forward, "trace"):
        return forward.trace()
    return torch.jit.trace(forward, (*inputs, *params), check_trace=False)


def compiled_forward(forward, fresh=False):
    """torch.compile's forward (compiled lazily, at its first call). fresh (W10A's samples):
    forget every earlier compile (torch._dynamo.reset()) and turn inductor's FX-graph and
    AOTAutograd caches off, for the rest of this process, so that each sample pays the whole
    compile but the C++ build of kernels this process has already built."""
    target = getattr(forward, "module", forward)
    if fresh:
        torch._dynamo.reset()
        torch._inductor.config.fx_graph_cache = False
        torch._functorch.config.enable_autograd_cache = False
    return torch.compile(target)


class TorchFramework(Framework):
    """PyTorch for peer_serve.py: the modes eager, script and compile (on a GPU, eager and compile)."""

    def __init__(self, device):
        self.device = device
        self.modes = ("eager", "script", "compile") if device == "cpu" else ("eager", "compile")
        if device != "cpu":
            torch.set_default_device(device)

    def versions(self):
        lines = [f"torch {torch.__version__}", f"blas {blas_in_use()}"]
        if self.device != "cpu":
            lines.append(f"gpu {torch.cuda.get_device_name()}")
        return lines

    def sync(self):
        if self.device != "cpu":
            torch.cuda.synchronize()

    def drop(self, name):
        torch._dynamo.reset()   # compiled code holds the workload's tensors

    def setup(self, name, modes):
        if name not in WORKLOADS:
            raise Unsupported(f"no PyTorch twin of {name}")
        forward, inputs, params, update = WORKLOADS[name]()
        return {mode: self.mode_step(mode, forward, inputs, params, update) for mode in modes}

    def mode_step(self, mode, forward, inputs, params, update):
        """The Step (or ColdStep) of one mode, or why there is none."""
        if mode != "eager" and getattr(forward, "not_static", None):
            return forward.not_static
        if mode == "eager":
            make = lambda: forward
        elif mode == "script":
            make = lambda: traced_forward(forward, inputs, params)
        elif mode == "compile":
            make = lambda: compiled_forward(forward, fresh=getattr(forward, "cold", False))
        else:
            return f"no mode {mode} (eager, script, compile)"
        if getattr(forward, "cold", False):
            return ColdStep(lambda: make_step(make(), inputs, params, update))
        try:
            static = make()
        except Exception as error:  # noqa: BLE001 -- a workload that cannot be traced: say so, skip
            return f"{type(error).__name__}: {error}"
        return Step(make_step(static, inputs, params, update), getattr(forward, "warmup", 20),
                    getattr(forward, "calls", None))


def blas_in_use():
    """The BLAS torch's matmuls go to: what it was built with when that is MKL (pip's wheels carry
    it inside libtorch), else the BLAS library mapped into this process after a product (Debian's
    torch loads the system's: its path says which)."""
    built_with = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    if built_with and built_with.group(1) == "mkl":
        return "mkl"
    torch.randn(8, 8).mm(torch.randn(8, 8))
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                name = os.path.basename(path).lower()
                if "blas" in name and "cublas" not in name and "numpy" not in path:
                    return path
    except OSError:
        pass
    return built_with.group(1) if built_with else "unknown"


if __name__ == "__main__":
    main(TorchFramework, list(WORKLOADS))
