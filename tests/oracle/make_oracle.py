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

def whole(shape):            # small whole numbers: ties and equalities happen (maximum's shared gradient, ne)
    return torch.randint(-2, 3, shape).double()

def with_zeros(shape):       # zeros among positive values (pow at a zero base)
    x = positive(shape)
    x.view(-1)[::2] = 0
    return x

def special(shape):          # NaN, infinities, zeros and ordinary values (isnan, isinf, isfinite)
    pool = torch.tensor([float("nan"), float("inf"), float("-inf"), 0.0, -1.5, 2.25], dtype=torch.float64)
    return pool[torch.randint(0, len(pool), shape)]

DOMAINS = {"any": any_values, "positive": positive, "whole": whole, "with_zeros": with_zeros, "special": special}
F = torch.nn.functional

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
    # a chain: gradients through several of them at once
    ("chain", "(x:sin() * y:cos()):square():log1p()",
     lambda x, y: torch.log1p(torch.square(torch.sin(x) * torch.cos(y))), [("x", (3, 2), "any"), ("y", (3, 2), "any")]),

    # --- issue 12: creation -------------------------------------------------------------------
    ("arange", "torch.arange(1, 10, 3)", lambda: torch.arange(1, 10, 3), []),
    ("arange", "torch.arange(0, 1, 0.1)", lambda: torch.arange(0, 1, 0.1), []),
    ("arange", "torch.arange(5, 0, -1.5, {dtype = 'float64'})", lambda: torch.arange(5, 0, -1.5, dtype=torch.float64), []),
    ("arange", "torch.arange(7)", lambda: torch.arange(7), []),
    ("linspace", "torch.linspace(-1, 2, 7, {dtype = 'float64'})", lambda: torch.linspace(-1, 2, 7, dtype=torch.float64), []),
    ("linspace", "torch.linspace(0, 1, 11)", lambda: torch.linspace(0, 1, 11), []),
    ("linspace", "torch.linspace(-3, 4, 4, {dtype = 'int64'})", lambda: torch.linspace(-3, 4, 4, dtype=torch.int64), []),
    ("zeros_like", "torch.zeros_like(x)", lambda x: torch.zeros_like(x), [("x", (2, 3), "any")]),
    ("ones_like", "torch.ones_like(x, {dtype = 'int64'})", lambda x: torch.ones_like(x, dtype=torch.int64), [("x", (2, 3), "any")]),
    ("full_like", "torch.full_like(x, 2.5)", lambda x: torch.full_like(x, 2.5), [("x", (3,), "any")]),
    ("tril", "x:tril()", lambda x: x.tril(), [("x", (3, 4), "any")]),
    ("tril", "torch.tril(x, -1)", lambda x: torch.tril(x, -1), [("x", (2, 3, 4), "any")]),
    ("triu", "x:triu(1)", lambda x: x.triu(1), [("x", (4, 3), "any")]),
    ("triu", "torch.triu(x, {diagonal = -1})", lambda x: torch.triu(x, diagonal=-1), [("x", (2, 4, 3), "any")]),

    # --- issue 12: elementwise ------------------------------------------------------------------
    ("ne", "x:ne(y)", lambda x, y: x.ne(y), [("x", (3, 4), "whole"), ("y", (4,), "whole")]),
    ("ne", "torch.ne(x, 1)", lambda x: torch.ne(x, 1), [("x", (3, 4), "whole")]),
    ("maximum", "torch.maximum(x, y)", lambda x, y: torch.maximum(x, y), [("x", (2, 3), "any"), ("y", (3,), "any")]),
    ("maximum", "x:maximum(y)", lambda x, y: x.maximum(y), [("x", (4, 3), "whole"), ("y", (4, 3), "whole")]),
    ("minimum", "torch.minimum(x, y)", lambda x, y: torch.minimum(x, y), [("x", (2, 1), "any"), ("y", (2, 3), "any")]),
    ("minimum", "x:minimum(y)", lambda x, y: x.minimum(y), [("x", (4, 3), "whole"), ("y", (4, 3), "whole")]),
    ("where", "torch.where(c:gt(0), x, y)", lambda c, x, y: torch.where(c > 0, x, y),
     [("c", (2, 3), "any"), ("x", (2, 3), "any"), ("y", (3,), "any")]),
    ("where", "x:where(c:lt(0), y)", lambda c, x, y: x.where(c < 0, y), [("c", (3, 1), "any"), ("x", (3, 2), "any"), ("y", (3, 2), "any")]),
    ("where", "torch.where(c:gt(0), x, 2.5)", lambda c, x: torch.where(c > 0, x, 2.5), [("c", (2, 3), "any"), ("x", (2, 3), "any")]),
    ("isnan", "x:isnan()", lambda x: x.isnan(), [("x", (3, 4), "special")]),
    ("isinf", "torch.isinf(x)", lambda x: torch.isinf(x), [("x", (3, 4), "special")]),
    ("isfinite", "x:isfinite()", lambda x: x.isfinite(), [("x", (3, 4), "special")]),
    ("clamp", "x:clamp(lo, hi)", lambda x, lo, hi: x.clamp(lo, hi), [("x", (3, 4), "any"), ("lo", (4,), "any"), ("hi", (3, 1), "any")]),
    ("clamp", "torch.clamp(x, {min = lo})", lambda x, lo: torch.clamp(x, min=lo), [("x", (3, 4), "any"), ("lo", (3, 4), "any")]),
    ("clamp", "x:clamp(nil, hi)", lambda x, hi: x.clamp(None, hi), [("x", (3, 4), "any"), ("hi", (4,), "any")]),
    ("clamp_min", "x:clamp_min(lo)", lambda x, lo: x.clamp_min(lo), [("x", (3, 4), "any"), ("lo", (4,), "any")]),
    ("clamp_min", "torch.clamp_min(x, 0.5)", lambda x: torch.clamp_min(x, 0.5), [("x", (3, 4), "any")]),
    ("clamp_max", "x:clamp_max(hi)", lambda x, hi: x.clamp_max(hi), [("x", (3, 4), "any"), ("hi", (3, 1), "any")]),
    ("clamp_max", "torch.clamp_max(x, -0.5)", lambda x: torch.clamp_max(x, -0.5), [("x", (3, 4), "any")]),
    ("leaky_relu", "F.leaky_relu(x)", lambda x: F.leaky_relu(x), [("x", (3, 4), "any")]),
    ("leaky_relu", "F.leaky_relu(x, {negative_slope = 0.3})", lambda x: F.leaky_relu(x, negative_slope=0.3), [("x", (3, 4), "any")]),
    ("elu", "F.elu(x)", lambda x: F.elu(x), [("x", (3, 4), "any")]),
    ("elu", "F.elu(x, 1.7)", lambda x: F.elu(x, 1.7), [("x", (3, 4), "any")]),
    ("gelu", "F.gelu(x)", lambda x: F.gelu(x), [("x", (3, 4), "any")]),
    ("gelu", "F.gelu(x, {approximate = 'tanh'})", lambda x: F.gelu(x, approximate="tanh"), [("x", (3, 4), "any")]),
    ("silu", "F.silu(x)", lambda x: F.silu(x), [("x", (3, 4), "any")]),
    ("softplus", "F.softplus(x)", lambda x: F.softplus(x), [("x", (3, 4), "any")]),
    ("softplus", "F.softplus(x, {beta = 2, threshold = 3})", lambda x: F.softplus(x, beta=2, threshold=3), [("x", (3, 4), "any")]),
    # pow at a zero base, a negative base and a zero exponent, as PyTorch (values and gradients)
    ("pow", "0 ^ x", lambda x: 0 ** x, [("x", (3, 4), "whole")]),
    ("pow", "(-2) ^ x", lambda x: (-2) ** x, [("x", (3, 4), "whole")]),
    ("pow", "2 ^ x", lambda x: 2 ** x, [("x", (3, 4), "any")]),
    ("pow", "x ^ 0", lambda x: x ** 0, [("x", (3, 4), "with_zeros")]),
    ("pow", "x ^ 2", lambda x: x ** 2, [("x", (3, 4), "with_zeros")]),
    ("pow", "x ^ y", lambda x, y: x ** y, [("x", (3, 4), "with_zeros"), ("y", (3, 4), "positive")]),
    ("pow", "x ^ y", lambda x, y: x ** y, [("x", (3, 4), "positive"), ("y", (4,), "whole")]),
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


def lua_string(s):
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')


def make_row(name, lua, fn, inputs):
    tensors = {}
    for input_name, shape, domain in inputs:
        tensors[input_name] = DOMAINS[domain](shape).requires_grad_(True)
    out = fn(*tensors.values())
    if out.dtype == torch.bool:   # tapedeck has no bool dtype: 1 and 0 in the inputs' float dtype (float64)
        out = out.to(torch.float64)
    w = torch.randn(out.shape, dtype=torch.float64)
    grads = [None] * len(tensors)
    if out.requires_grad:
        grads = torch.autograd.grad((out * w).sum(), list(tensors.values()), allow_unused=True)
    lines = ["  {name = %s, lua = %s, dtype = %s," % (lua_string(name), lua_string(lua), lua_string(str(out.dtype)[6:]))]
    lines.append("   inputs = {%s}," % ", ".join("%s = %s" % (k, lua_tensor(v)) for k, v in tensors.items()))
    lines.append("   output = %s, w = %s," % (lua_tensor(out), lua_tensor(w)))
    grad_text = []
    for (k, v), g in zip(tensors.items(), grads):
        grad_text.append("%s = %s" % (k, lua_tensor(g if g is not None else torch.zeros_like(v))))
    lines.append("   grads = {%s}}," % ", ".join(grad_text))
    return "\n".join(lines)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    body = "\n".join(make_row(*row) for row in ROWS)
    text = ("-- oracle_data.lua: made by tests/oracle/make_oracle.py with PyTorch %s; do not edit.\n"
            "-- Each row: a Lua expression, its float64 inputs, PyTorch's output (and its dtype), weights w and the\n"
            "-- gradients of sum(output * w) for each input.\n"
            "return {\n%s\n}\n" % (torch.__version__, body))
    with open(os.path.join(here, "oracle_data.lua"), "w") as f:
        f.write(text)
    print("wrote %d rows" % len(ROWS))


if __name__ == "__main__":
    main()
