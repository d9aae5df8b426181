#!/usr/bin/env python3
"""bench_torch.py: the bench.lua workloads in PyTorch, eager and TorchScript, one thread.

    python3 bench_torch.py SAMPLES [W1 W2 ...]

Prints one line per workload and mode: "W2 eager <min µs> <median µs>" and "W2 script <min> <median>"
(TorchScript: torch.jit.trace of the step, backward included, as the anchors measured). `tapedeck
bench` runs it when PyTorch is installed and adds its columns. Adding a workload = one function
returning (step, args) below, named like the Lua one.
"""
import sys
import time

import torch

torch.set_num_threads(1)
torch.manual_seed(0)


def w1():
    a = torch.tensor(15.0, requires_grad=True)
    b = torch.tensor(20.0, requires_grad=True)

    def step():
        a.grad = None
        b.grad = None
        (a * b).backward()
    return step, ()


def w2():
    W_h = torch.randn(20, 20, requires_grad=True)
    W_x = torch.randn(20, 10, requires_grad=True)
    x, prev_h = torch.randn(1, 10), torch.randn(1, 20)

    def step(x, prev_h):
        W_h.grad = None
        W_x.grad = None
        next_h = torch.tanh(W_h.mm(prev_h.t()) + W_x.mm(x.t()))
        next_h.sum().backward()
    return step, (x, prev_h)


def w3():
    W_h = torch.randn(20, 20, requires_grad=True)
    W_x = torch.randn(20, 10, requires_grad=True)
    xs = [torch.randn(10, 1) for _ in range(50)]
    h0 = torch.randn(20, 1)

    def step(h0):
        W_h.grad = None
        W_x.grad = None
        h = h0
        for t in range(50):
            h = torch.tanh(W_h.mm(h) + W_x.mm(xs[t]))
        h.sum().backward()
    return step, (h0,)


def w4():
    x, y = torch.randn(64, 1000), torch.randn(64, 10)
    w1 = torch.randn(1000, 100, requires_grad=True)
    w2 = torch.randn(100, 10, requires_grad=True)
    w1.grad, w2.grad = torch.zeros(1000, 100), torch.zeros(100, 10)

    def step(x, y):
        loss = (x.mm(w1).clamp(min=0).mm(w2) - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            w1.sub_(w1.grad, alpha=1e-6)
            w2.sub_(w2.grad, alpha=1e-6)
            w1.grad.zero_()
            w2.grad.zero_()
    return step, (x, y)


def w5():
    x, y = torch.randn(64, 1000), torch.randn(64, 1000)
    W1, b1 = (torch.randn(1000, 100) * 0.03).requires_grad_(), torch.zeros(100, requires_grad=True)
    W2, b2 = (torch.randn(100, 1000) * 0.1).requires_grad_(), torch.zeros(1000, requires_grad=True)

    def step(x, y):
        pred = (x.mm(W1) + b1).relu().mm(W2) + b2
        return (pred - y).pow(2).mean()
    return step, (x, y)


def w6():
    x = torch.randn(8, 1, 28, 28)
    labels = torch.arange(8)
    conv = torch.nn.Conv2d(1, 8, 3, padding=1)
    fc = torch.nn.Linear(1568, 10)

    def step(x, labels):
        for p in (*conv.parameters(), *fc.parameters()):
            p.grad = None
        h = torch.nn.functional.max_pool2d(conv(x).relu(), 2).reshape(8, 1568)
        torch.nn.functional.cross_entropy(fc(h), labels).backward()
    return step, (x, labels)


WORKLOADS = {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5, "W6": w6}


def measure(fn, samples):
    for _ in range(20):
        fn()
    iterations = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(iterations):
            fn()
        if time.perf_counter() - t0 > 0.02:
            break
        iterations *= 2
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(iterations):
            fn()
        times.append((time.perf_counter() - t0) / iterations * 1e6)
    times.sort()
    return times[0], times[len(times) // 2]


def main():
    samples = int(sys.argv[1]) if len(sys.argv) > 1 else 25
    names = [n.upper() for n in sys.argv[2:]] or list(WORKLOADS)
    for name in names:
        if name not in WORKLOADS:
            continue
        step, args = WORKLOADS[name]()
        lo, mid = measure(lambda: step(*args), samples)
        print(f"{name} eager {lo:.3f} {mid:.3f}", flush=True)
        try:
            traced = torch.jit.trace(step, args, check_trace=False) if args else None
        except Exception as error:  # some steps (no tensor output) cannot be traced: say so, skip
            print(f"# {name}: torch.jit.trace failed: {error}", file=sys.stderr)
            traced = None
        if traced is not None:
            lo, mid = measure(lambda: traced(*args), samples)
            print(f"{name} script {lo:.3f} {mid:.3f}", flush=True)


if __name__ == "__main__":
    main()
