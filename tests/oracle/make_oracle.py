#!/usr/bin/python3
"""make_oracle.py: PyTorch's values and gradients for tapedeck's Lua functions, as Lua data.

    /usr/bin/python3 tests/oracle/make_oracle.py     (Debian's python3-torch, or pip's torch)

writes tests/oracle/oracle_data.lua, which tests/lua/test_oracle.lua checks tapedeck against.
Each row is one call written twice: as PyTorch (a Python function of the inputs) and as tapedeck's
Lua (an expression over the same input names). Inputs are float64, seeded; the row stores the
output and the gradient of sum(output * w) for each input (w: random weights, stored too), so a
wrong value or a wrong gradient anywhere in the output fails the Lua test.

A new function gets a row here, then the script is run again and its output committed.
"""
import os
import torch

torch.manual_seed(0)

# Input domains: where the function and its gradient are defined and smooth.
def any_values(shape):       # away from 0 (abs, sign) and from whole numbers and halves (floor, round)
    x = torch.rand(shape, dtype=torch.float64) * 0.3 + 0.1 + torch.randint(-3, 3, shape).double()
    return x

def positive(shape):
    return torch.rand(shape, dtype=torch.float64) * 1.8 + 0.2

DOMAINS = {"any": any_values, "positive": positive}

def rnn_outputs(x, w):
    o = torch.zeros(3, 2, dtype=torch.float64)
    h = x[0]
    for t in range(3):
        h = torch.tanh(h * w)
        o[t] = h
    return o


def writes_through_views(x, w):
    y = x * 1
    y.narrow(1, 0, 1).mul_(3)
    y[1, :].add_(w)
    y[2, 1] = 7
    return y


def assign_column(x, w):
    y = x.clone()
    y[:, 1] = w
    return y


# (name, lua expression, torch function, [(input name, shape, domain)])
ROWS = [
    ("sin", "torch.sin(x)", lambda x: torch.sin(x), [("x", (2, 3), "any")]),
    ("sin", "x:sin()", lambda x: x.sin(), [("x", (4,), "any")]),
    ("cos", "x:cos()", lambda x: torch.cos(x), [("x", (2, 3), "any")]),
    ("log1p", "x:log1p()", lambda x: torch.log1p(x), [("x", (2, 3), "positive")]),
    ("expm1", "torch.expm1(x)", lambda x: torch.expm1(x), [("x", (2, 3), "any")]),
    ("reciprocal", "x:reciprocal()", lambda x: torch.reciprocal(x), [("x", (2, 3), "any")]),
    ("rsqrt", "x:rsqrt()", lambda x: torch.rsqrt(x), [("x", (2, 3), "positive")]),
    ("square", "x:square()", lambda x: torch.square(x), [("x", (2, 3), "any")]),
    ("floor", "x:floor()", lambda x: torch.floor(x), [("x", (2, 3), "any")]),
    ("ceil", "x:ceil()", lambda x: torch.ceil(x), [("x", (2, 3), "any")]),
    ("round", "x:round()", lambda x: torch.round(x), [("x", (2, 3), "any")]),
    ("trunc", "x:trunc()", lambda x: torch.trunc(x), [("x", (2, 3), "any")]),
    ("sign", "x:sign()", lambda x: torch.sign(x), [("x", (2, 3), "any")]),
    ("clone", "x:clone()", lambda x: x.clone(), [("x", (2, 3), "any")]),
    ("neg", "x:neg()", lambda x: torch.neg(x), [("x", (2, 3), "any")]),
    ("exp", "x:exp()", lambda x: torch.exp(x), [("x", (2, 3), "any")]),
    ("log", "x:log()", lambda x: torch.log(x), [("x", (2, 3), "positive")]),
    ("sqrt", "x:sqrt()", lambda x: torch.sqrt(x), [("x", (2, 3), "positive")]),
    ("abs", "x:abs()", lambda x: torch.abs(x), [("x", (2, 3), "any")]),
    ("tanh", "x:tanh()", lambda x: torch.tanh(x), [("x", (2, 3), "any")]),
    ("sigmoid", "x:sigmoid()", lambda x: torch.sigmoid(x), [("x", (2, 3), "any")]),
    ("relu", "x:relu()", lambda x: torch.relu(x), [("x", (2, 3), "any")]),
    # views, indexing and writes through them (the gradient of index assignment as PyTorch's)
    ("t", "x:t()", lambda x: x.t(), [("x", (2, 3), "any")]),
    ("permute", "x:permute(3, 1, 2)", lambda x: x.permute(2, 0, 1), [("x", (2, 3, 4), "any")]),
    ("select", "x:select(2, -1)", lambda x: x.select(1, -1), [("x", (2, 3), "any")]),
    ("index", "x[{2, {1, 2}}] * 2", lambda x: x[1, 0:2] * 2, [("x", (3, 3), "any")]),
    ("index", "x[{{}, {1, -1, 2}}]", lambda x: x[:, 0::2], [("x", (3, 4), "any")]),
    ("index", "x[-1]", lambda x: x[-1], [("x", (3, 2), "any")]),
    ("expand", "y:expand(3, 2) * x", lambda x, y: y.expand(3, 2) * x, [("x", (3, 2), "any"), ("y", (1, 2), "any")]),
    ("reshape", "x:t():reshape(-1)", lambda x: x.t().reshape(-1), [("x", (2, 3), "any")]),
    ("view", "x:view(3, 2):t()", lambda x: x.view(3, 2).t(), [("x", (2, 3), "any")]),
    ("contiguous", "x:transpose(1, 2):contiguous()", lambda x: x.transpose(0, 1).contiguous(), [("x", (2, 3), "any")]),
    ("rnn outputs[t] = h", "(function() local o = torch.zeros(3, 2, {dtype = torch.float64}); local h = x[1]; "
     "for t = 1, 3 do h = (h * w):tanh(); o[t] = h end; return o end)()", rnn_outputs,
     [("x", (3, 2), "any"), ("w", (2,), "any")]),
    ("in place through views", "(function() local y = x * 1; y:narrow(2, 1, 1):mul_(3); y[{2, {}}]:add_(w); "
     "y[{3, 2}] = 7; return y end)()", writes_through_views, [("x", (3, 2), "any"), ("w", (2,), "any")]),
    ("assign a broadcast tensor", "(function() local y = x:clone(); y[{{}, 2}] = w; return y end)()",
     assign_column, [("x", (2, 3), "any"), ("w", (1,), "any")]),
    # a chain: gradients through several of them at once
    ("chain", "(x:sin() * y:cos()):square():log1p()",
     lambda x, y: torch.log1p(torch.square(torch.sin(x) * torch.cos(y))), [("x", (3, 2), "any"), ("y", (3, 2), "any")]),
]


def lua_number(v):
    if v != v:
        return "0/0"
    if v in (float("inf"), float("-inf")):
        return "1/0" if v > 0 else "-1/0"
    return repr(float(v))


def lua_tensor(t):
    values = ", ".join(lua_number(v) for v in t.detach().reshape(-1).tolist())
    shape = ", ".join(str(d) for d in t.shape)
    return "{shape = {%s}, values = {%s}}" % (shape, values)


def make_row(name, lua, fn, inputs):
    tensors = {}
    for input_name, shape, domain in inputs:
        tensors[input_name] = DOMAINS[domain](shape).requires_grad_(True)
    out = fn(*tensors.values())
    w = torch.randn(out.shape, dtype=torch.float64)
    grads = torch.autograd.grad((out * w).sum(), list(tensors.values()), allow_unused=True)
    lines = ["  {name = %r, lua = %r," % (name, lua)]
    lines.append("   inputs = {%s}," % ", ".join("%s = %s" % (k, lua_tensor(v)) for k, v in tensors.items()))
    lines.append("   output = %s, w = %s," % (lua_tensor(out), lua_tensor(w)))
    grad_text = []
    for (k, v), g in zip(tensors.items(), grads):
        grad_text.append("%s = %s" % (k, lua_tensor(g if g is not None else torch.zeros_like(v))))
    lines.append("   grads = {%s}}," % ", ".join(grad_text))
    return "\n".join(lines).replace("'", '"')


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    body = "\n".join(make_row(*row) for row in ROWS)
    text = ("-- oracle_data.lua: made by tests/oracle/make_oracle.py with PyTorch %s; do not edit.\n"
            "-- Each row: a Lua expression, its float64 inputs, PyTorch's output, weights w and the\n"
            "-- gradients of sum(output * w) for each input.\n"
            "return {\n%s\n}\n" % (torch.__version__, body))
    with open(os.path.join(here, "oracle_data.lua"), "w") as f:
        f.write(text)
    print("wrote %d rows" % len(ROWS))


if __name__ == "__main__":
    main()
