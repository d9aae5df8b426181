"""make_backward_twice_oracle.py: PyTorch's behaviour for a second backward() through one graph,
for tests/lua/test_backward_twice.lua.

Run: python3 tests/oracle/make_backward_twice_oracle.py > tests/oracle/backward_twice_oracle_data.lua

Each case (written the same way in the Lua test, by its name) makes a graph from x = [0.5, -1, 2]
(float64, requires grad), runs its calls in order, and records per call whether PyTorch raised
("Trying to backward through the graph a second time") and x.grad after it (nil when None).
"""
import torch

from lua_literal import lua_string, lua_value

DT = torch.float64


def run(case):
    x = torch.tensor([0.5, -1.0, 2.0], dtype=DT, requires_grad=True)
    calls = CASES[case](x)
    results = []
    for call in calls:
        try:
            call()
            raised = False
        except RuntimeError as e:
            assert "backward through the graph a second time" in str(e), str(e)
            raised = True
        results.append((raised, None if x.grad is None else x.grad.clone()))
    return results


def saves_nothing(x):
    y = (x + 1).sum()   # add and sum save no tensor: a second pass runs
    return [lambda: y.backward(), lambda: y.backward()]


def saves_inputs(x):
    y = (x * x).sum()   # mul saves its inputs: freed by the first pass
    return [lambda: y.backward(), lambda: y.backward()]


def retained(x):
    y = (x * x).sum()
    return [lambda: y.backward(retain_graph=True), lambda: y.backward(), lambda: y.backward()]


def shared_subgraph(x):
    h = x.tanh()        # tanh saves its output: the first loss frees it for the second
    a, b = h.sum(), (h * 2).sum()
    return [lambda: a.backward(), lambda: b.backward()]


def create_graph(x):
    y = (x * x).sum()   # create_graph retains the graph
    return [lambda: y.backward(create_graph=True), lambda: y.backward()]


def custom_function(x):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            ctx.save_for_backward(v)
            return v * v

        @staticmethod
        def backward(ctx, g):
            (v,) = ctx.saved_tensors
            return 2 * v * g

    y = Square.apply(x).sum()
    return [lambda: y.backward(), lambda: y.backward()]


CASES = {
    "saves_nothing": saves_nothing,
    "saves_inputs": saves_inputs,
    "retained": retained,
    "shared_subgraph": shared_subgraph,
    "create_graph": create_graph,
    "custom_function": custom_function,
}

print("-- made by tests/oracle/make_backward_twice_oracle.py with PyTorch " + torch.__version__)
print("return {")
for name in CASES:
    rows = ", ".join("{raised = %s, grad = %s}" % ("true" if r else "false", "nil" if g is None else lua_value(g))
                     for r, g in run(name))
    print("  %s = {%s}," % (name, rows))
print("}")
