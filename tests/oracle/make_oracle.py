#!/usr/bin/python3
"""make_oracle.py: PyTorch's values and gradients for tapedeck's Lua functions, as Lua data.

    /usr/bin/python3 tests/oracle/make_oracle.py     (Debian's python3-torch, or pip's torch)

writes tests/oracle/oracle_data.lua, which tests/lua/test_oracle.lua checks tapedeck against.
Each row is one call written twice: as PyTorch (a Python function of the inputs) and as tapedeck's
Lua (an expression over the same input names). Inputs are float64, seeded (or given: an int64
tensor is an index, 0-based here and 1-based in Lua); the row stores the outputs (a PyTorch tuple
is several Lua returns; int64 outputs are indices, stored 1-based) and the gradient of the sum of
sum(output * w) over the float outputs for each input (w: random weights, stored too), so a wrong
value or a wrong gradient anywhere in the output fails the Lua test.

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

def ties(shape):             # whole numbers 0..2: many equal values (amax/amin share their gradient)
    return torch.randint(0, 3, shape).double()

def with_zeros(shape):       # rows with no zero, one zero, two zeros (prod's gradient)
    x = any_values(shape)
    x[1, 1] = 0
    x[2, 0] = 0
    x[2, 3] = 0
    return x

DOMAINS = {"any": any_values, "positive": positive, "ties": ties, "with_zeros": with_zeros}

def index(*rows):            # an int64 index, 0-based as PyTorch reads it
    return torch.tensor(rows, dtype=torch.int64)

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


def assign_rows(x, w):
    y = x * 1
    y[torch.tensor([2, 0])] = w
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
    ("index", "x[torch.tensor({3, 1, 3}, {dtype = torch.int64})]", lambda x: x[torch.tensor([2, 0, 2])],
     [("x", (3, 2), "any")]),
    ("index", "x[x:gt(0)]", lambda x: x[x > 0], [("x", (3, 4), "any")]),
    ("assign rows by index", "(function() local y = x * 1; y[torch.tensor({3, 1}, {dtype = torch.int64})] = w; return y end)()",
     assign_rows, [("x", (3, 2), "any"), ("w", (2, 2), "any")]),
    ("assign a broadcast tensor", "(function() local y = x:clone(); y[{{}, 2}] = w; return y end)()",
     assign_column, [("x", (2, 3), "any"), ("w", (1,), "any")]),
    # a chain: gradients through several of them at once
    ("chain", "(x:sin() * y:cos()):square():log1p()",
     lambda x, y: torch.log1p(torch.square(torch.sin(x) * torch.cos(y))), [("x", (3, 2), "any"), ("y", (3, 2), "any")]),

    # --- reductions (lua_reduce_shape_ops.cpp) ---------------------------------------------------
    ("sum", "x:sum({1, 3})", lambda x: x.sum((0, 2)), [("x", (2, 3, 4), "any")]),
    ("sum", "x:sum(2, {keepdim = true})", lambda x: x.sum(1, keepdim=True), [("x", (2, 3, 4), "any")]),
    ("sum", "x:sum{dim = {-1, 1}, keepdims = true}", lambda x: x.sum((-1, 0), keepdim=True), [("x", (2, 3, 4), "any")]),
    ("sum", "torch.sum(x, 2, true)", lambda x: torch.sum(x, 1, True), [("x", (2, 3), "any")]),
    ("sum", "x:sum()", lambda x: x.sum(), [("x", (2, 3), "any")]),
    ("mean", "x:mean({1, 2})", lambda x: x.mean((0, 1)), [("x", (2, 3, 4), "any")]),
    ("mean", "torch.mean(x, -1, true)", lambda x: torch.mean(x, -1, True), [("x", (2, 3), "any")]),
    ("prod", "x:prod()", lambda x: x.prod(), [("x", (2, 3), "any")]),
    ("prod", "x:prod(2)", lambda x: x.prod(1), [("x", (3, 4), "any")]),
    ("prod", "x:prod(2, true)", lambda x: x.prod(1, True), [("x", (3, 4), "with_zeros")]),
    ("prod", "x:prod(1)", lambda x: x.prod(0), [("x", (3, 4), "with_zeros")]),
    ("max", "x:max()", lambda x: x.max(), [("x", (3, 4), "ties")]),
    ("max", "x:max(2)", lambda x: x.max(1), [("x", (3, 4), "any")]),
    ("max", "torch.max(x, 1, true)", lambda x: torch.max(x, 0, True), [("x", (3, 4), "any")]),
    ("min", "x:min()", lambda x: x.min(), [("x", (3, 4), "ties")]),
    ("min", "x:min(-1)", lambda x: x.min(-1), [("x", (2, 3, 4), "any")]),
    ("amax", "x:amax({1, 3})", lambda x: x.amax((0, 2)), [("x", (2, 3, 4), "ties")]),
    ("amax", "x:amax(2, true)", lambda x: x.amax(1, True), [("x", (3, 4), "ties")]),
    ("amax", "x:amax()", lambda x: x.amax(), [("x", (3, 4), "ties")]),
    ("amin", "torch.amin(x, -1)", lambda x: torch.amin(x, -1), [("x", (3, 4), "ties")]),
    ("argmax", "x:argmax()", lambda x: x.argmax(), [("x", (3, 4), "any")]),
    ("argmax", "x:argmax(2)", lambda x: x.argmax(1), [("x", (3, 4), "any")]),
    ("argmin", "x:argmin(1, true)", lambda x: x.argmin(0, True), [("x", (3, 4), "any")]),
    ("var", "x:var()", lambda x: x.var(), [("x", (3, 4), "any")]),
    ("var", "x:var(2)", lambda x: x.var(1), [("x", (3, 4), "any")]),
    ("var", "x:var(2, false)", lambda x: x.var(1, False), [("x", (3, 4), "any")]),
    ("var", "x:var(false)", lambda x: x.var(False), [("x", (3, 4), "any")]),
    ("var", "x:var({1, 3}, {keepdim = true})", lambda x: x.var((0, 2), keepdim=True), [("x", (2, 3, 4), "any")]),
    ("var", "x:var{dim = 2, correction = 0}", lambda x: torch.var(x, 1, correction=0), [("x", (3, 4), "any")]),
    ("std", "x:std()", lambda x: x.std(), [("x", (3, 4), "any")]),
    ("std", "x:std(1, true, true)", lambda x: x.std(0, True, True), [("x", (3, 4), "any")]),
    ("norm", "x:norm()", lambda x: x.norm(), [("x", (3, 4), "any")]),
    ("norm", "x:norm(1)", lambda x: x.norm(1), [("x", (3, 4), "any")]),
    ("norm", "x:norm(math.huge)", lambda x: x.norm(float("inf")), [("x", (3, 4), "any")]),
    ("norm", "x:norm(-math.huge, 1)", lambda x: x.norm(float("-inf"), 0), [("x", (3, 4), "any")]),
    ("norm", "x:norm(3, 2)", lambda x: x.norm(3, 1), [("x", (3, 4), "any")]),
    ("norm", "x:norm(\"fro\", {1, 2}, true)", lambda x: x.norm("fro", (0, 1), True), [("x", (2, 3, 4), "any")]),
    ("logsumexp", "x:logsumexp(2)", lambda x: x.logsumexp(1), [("x", (3, 4), "any")]),
    ("logsumexp", "x:logsumexp({1, 2}, true)", lambda x: x.logsumexp((0, 1), True), [("x", (2, 3, 4), "any")]),
    ("cumsum", "x:cumsum(2)", lambda x: x.cumsum(1), [("x", (3, 4), "any")]),
    ("cumsum", "torch.cumsum(x, -3)", lambda x: torch.cumsum(x, -3), [("x", (2, 3, 4), "any")]),
    ("topk", "x:topk(2)", lambda x: x.topk(2), [("x", (3, 4), "any")]),
    ("topk", "x:topk(2, 1, false)", lambda x: x.topk(2, 0, False), [("x", (3, 4), "any")]),
    ("topk", "x:topk(3, {dim = 2, largest = false, sorted = true})", lambda x: x.topk(3, 1, largest=False), [("x", (2, 4, 3), "any")]),
    ("sort", "x:sort()", lambda x: x.sort(), [("x", (3, 4), "any")]),
    ("sort", "x:sort(1, true)", lambda x: x.sort(0, True), [("x", (3, 4), "any")]),
    ("sort", "x:sort{dim = 2, descending = true}", lambda x: x.sort(1, descending=True), [("x", (2, 3, 4), "any")]),
    # --- shape ------------------------------------------------------------------------------------
    ("stack", "torch.stack({x, y})", lambda x, y: torch.stack([x, y]), [("x", (2, 3), "any"), ("y", (2, 3), "any")]),
    ("stack", "torch.stack({x, y, x}, 2)", lambda x, y: torch.stack([x, y, x], 1), [("x", (2, 3), "any"), ("y", (2, 3), "any")]),
    ("stack", "torch.stack({x, y}, -1)", lambda x, y: torch.stack([x, y], -1), [("x", (2, 3), "any"), ("y", (2, 3), "any")]),
    ("split", "x:split(2)", lambda x: x.split(2), [("x", (5, 3), "any")]),
    ("split", "x:split({1, 3, 1})", lambda x: x.split([1, 3, 1]), [("x", (5, 3), "any")]),
    ("split", "torch.split(x, 2, 2)", lambda x: torch.split(x, 2, 1), [("x", (2, 3), "any")]),
    ("chunk", "x:chunk(2)", lambda x: x.chunk(2), [("x", (5, 3), "any")]),
    ("chunk", "x:chunk(3, 2)", lambda x: x.chunk(3, 1), [("x", (2, 7), "any")]),
    ("unbind", "x:unbind()", lambda x: x.unbind(), [("x", (3, 2), "any")]),
    ("unbind", "torch.unbind(x, 2)", lambda x: torch.unbind(x, 1), [("x", (3, 2), "any")]),
    ("flip", "x:flip(1)", lambda x: x.flip(0), [("x", (2, 3, 4), "any")]),
    ("flip", "x:flip({1, 3})", lambda x: x.flip((0, 2)), [("x", (2, 3, 4), "any")]),
    ("flip", "torch.flip(x, {-1, 2})", lambda x: torch.flip(x, (-1, 1)), [("x", (2, 3, 4), "any")]),
    ("roll", "x:roll(1, 2)", lambda x: x.roll(1, 1), [("x", (3, 4), "any")]),
    ("roll", "x:roll({1, -2}, {1, 2})", lambda x: x.roll((1, -2), (0, 1)), [("x", (3, 4), "any")]),
    ("roll", "x:roll(5)", lambda x: x.roll(5), [("x", (3, 4), "any")]),
    ("tile", "x:tile(2, 1)", lambda x: x.tile((2, 1)), [("x", (2, 3), "any")]),
    ("tile", "torch.tile(x, {2})", lambda x: torch.tile(x, (2,)), [("x", (2, 3), "any")]),
    ("repeat", 'x["repeat"](x, 2, 1, 3)', lambda x: x.repeat(2, 1, 3), [("x", (2, 3), "any")]),
    ("repeat", 'x["repeat"](x, {3, 2})', lambda x: x.repeat(3, 2), [("x", (2, 3), "any")]),
    ("flatten", "x:flatten(2)", lambda x: x.flatten(1), [("x", (2, 3, 4), "any")]),
    ("flatten", "torch.flatten(x, 1, 2)", lambda x: torch.flatten(x, 0, 1), [("x", (2, 3, 4), "any")]),
    ("unflatten", "x:unflatten(2, {2, -1})", lambda x: x.unflatten(1, (2, -1)), [("x", (3, 4), "any")]),
    ("expand_as", "x:expand_as(y)", lambda x, y: x.expand_as(y), [("x", (3, 1), "any"), ("y", (2, 3, 4), "any")]),
    ("view_as", "x:view_as(y)", lambda x, y: x.view_as(y), [("x", (3, 4), "any"), ("y", (2, 6), "any")]),
    ("reshape_as", "x:reshape_as(y)", lambda x, y: x.reshape_as(y), [("x", (3, 4), "any"), ("y", (6, 2), "any")]),
    ("index_select", "x:index_select(2, i)", lambda x, i: x.index_select(1, i), [("x", (3, 4), "any"), ("i", index(3, 0, 3), None)]),
    ("index_select", "torch.index_select(x, 1, i)", lambda x, i: torch.index_select(x, 0, i), [("x", (3, 4), "any"), ("i", index(2, 2), None)]),
    ("gather", "x:gather(2, i)", lambda x, i: x.gather(1, i), [("x", (3, 4), "any"), ("i", index([3, 0], [1, 1]), None)]),
    ("scatter", "x:scatter(1, i, y)", lambda x, i, y: x.scatter(0, i, y),
     [("x", (3, 4), "any"), ("i", index([2, 0, 1, 0], [0, 1, 2, 2]), None), ("y", (2, 4), "any")]),
    ("scatter", "x:scatter(2, i, y)", lambda x, i, y: x.scatter(1, i, y),
     [("x", (3, 4), "any"), ("i", index([3, 1], [0, 2]), None), ("y", (2, 2), "any")]),
    ("scatter", "x:scatter(2, i, 2.5)", lambda x, i: x.scatter(1, i, 2.5), [("x", (3, 4), "any"), ("i", index([3, 1], [0, 2]), None)]),
    ("scatter_add", "x:scatter_add(1, i, y)", lambda x, i, y: x.scatter_add(0, i, y),
     [("x", (3, 4), "any"), ("i", index([2, 0, 1, 0], [2, 1, 1, 0]), None), ("y", (2, 4), "any")]),
    ("scatter_add", "torch.scatter_add(x, 2, i, y)", lambda x, i, y: torch.scatter_add(x, 1, i, y),
     [("x", (3, 4), "any"), ("i", index([3, 3], [0, 2]), None), ("y", (2, 2), "any")]),
    ("diag", "x:diag()", lambda x: x.diag(), [("x", (3, 4), "any")]),
    ("diag", "x:diag(1)", lambda x: x.diag(1), [("x", (3, 4), "any")]),
    ("diag", "torch.diag(x, -2)", lambda x: torch.diag(x, -2), [("x", (3, 4), "any")]),
    ("diag", "v:diag()", lambda v: v.diag(), [("v", (3,), "any")]),
    ("diag", "v:diag(-1)", lambda v: v.diag(-1), [("v", (3,), "any")]),
    ("diag", "torch.diag(v, 2)", lambda v: torch.diag(v, 2), [("v", (2,), "any")]),
    # --- products ---------------------------------------------------------------------------------
    ("matmul", "torch.matmul(a, b)", lambda a, b: torch.matmul(a, b), [("a", (2, 1, 3, 4), "any"), ("b", (5, 4, 2), "any")]),
    ("matmul", "a:matmul(b)", lambda a, b: a.matmul(b), [("a", (3, 4), "any"), ("b", (2, 4, 5), "any")]),
    ("matmul", "a:matmul(b)", lambda a, b: a.matmul(b), [("a", (4,), "any"), ("b", (2, 4, 3), "any")]),
    ("matmul", "a:matmul(b)", lambda a, b: a.matmul(b), [("a", (2, 2, 3, 4), "any"), ("b", (4,), "any")]),
    ("matmul", "a:matmul(b)", lambda a, b: a.matmul(b), [("a", (2, 2, 3, 4), "any"), ("b", (2, 2, 4, 3), "any")]),
    ("matmul", "a:matmul(b)", lambda a, b: a.matmul(b), [("a", (2, 3, 4), "any"), ("b", (4, 2), "any")]),
    ("dot", "torch.dot(a, b)", lambda a, b: torch.dot(a, b), [("a", (4,), "any"), ("b", (4,), "any")]),
    ("outer", "a:outer(b)", lambda a, b: a.outer(b), [("a", (3,), "any"), ("b", (4,), "any")]),
    ("addmm", "torch.addmm(c, a, b)", lambda c, a, b: torch.addmm(c, a, b), [("c", (2, 4), "any"), ("a", (2, 3), "any"), ("b", (3, 4), "any")]),
    ("addmm", "c:addmm(a, b, {beta = 0.5, alpha = 2})", lambda c, a, b: c.addmm(a, b, beta=0.5, alpha=2),
     [("c", (4,), "any"), ("a", (2, 3), "any"), ("b", (3, 4), "any")]),
    ("einsum", "torch.einsum(\"ij,jk->ik\", a, b)", lambda a, b: torch.einsum("ij,jk->ik", a, b), [("a", (2, 3), "any"), ("b", (3, 4), "any")]),
    ("einsum", "torch.einsum(\"bij,bjk->bik\", {a, b})", lambda a, b: torch.einsum("bij,bjk->bik", a, b), [("a", (2, 2, 3), "any"), ("b", (2, 3, 4), "any")]),
    ("einsum", "torch.einsum(\"bhqd,bhkd->bhqk\", q, k)", lambda q, k: torch.einsum("bhqd,bhkd->bhqk", q, k), [("q", (2, 2, 3, 4), "any"), ("k", (2, 2, 5, 4), "any")]),
    ("einsum", "torch.einsum(\"bhqk,bhkd->bhqd\", p, v)", lambda p, v: torch.einsum("bhqk,bhkd->bhqd", p, v), [("p", (2, 2, 3, 5), "any"), ("v", (2, 2, 5, 4), "any")]),
    ("einsum", "torch.einsum(\"i,i->\", a, b)", lambda a, b: torch.einsum("i,i->", a, b), [("a", (4,), "any"), ("b", (4,), "any")]),
    ("einsum", "torch.einsum(\"i,j->ij\", a, b)", lambda a, b: torch.einsum("i,j->ij", a, b), [("a", (3,), "any"), ("b", (4,), "any")]),
    ("einsum", "torch.einsum(\"ii->i\", a)", lambda a: torch.einsum("ii->i", a), [("a", (3, 3), "any")]),
    ("einsum", "torch.einsum(\"ii\", a)", lambda a: torch.einsum("ii", a), [("a", (3, 3), "any")]),
    ("einsum", "torch.einsum(\"ij->ji\", a)", lambda a: torch.einsum("ij->ji", a), [("a", (2, 3), "any")]),
    ("einsum", "torch.einsum(\"ij,kj\", a, b)", lambda a, b: torch.einsum("ij,kj", a, b), [("a", (2, 3), "any"), ("b", (4, 3), "any")]),
    ("einsum", "torch.einsum(\"bij,bkj,k->bi\", a, b, c)", lambda a, b, c: torch.einsum("bij,bkj,k->bi", a, b, c),
     [("a", (2, 3, 4), "any"), ("b", (2, 5, 4), "any"), ("c", (5,), "any")]),
]


def lua_number(v):
    if v != v:
        return "0/0"
    if v in (float("inf"), float("-inf")):
        return "1/0" if v > 0 else "-1/0"
    return repr(float(v))


def lua_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def lua_tensor(t):
    """A tensor as Lua data; int64 ones are indices, written 1-based."""
    if t.dtype == torch.int64:
        values = ", ".join(str(v + 1) for v in t.reshape(-1).tolist())
        dtype = ', dtype = "int64"'
    else:
        values = ", ".join(lua_number(v) for v in t.detach().reshape(-1).tolist())
        dtype = ""
    shape = ", ".join(str(d) for d in t.shape)
    return "{shape = {%s}, values = {%s}%s}" % (shape, values, dtype)


def make_row(name, lua, fn, inputs):
    tensors = {}
    for input_name, shape, domain in inputs:
        if isinstance(shape, torch.Tensor):   # given: an index
            tensors[input_name] = shape
        else:
            tensors[input_name] = DOMAINS[domain](shape).requires_grad_(True)
    result = fn(*tensors.values())
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    ws = [torch.randn(o.shape, dtype=torch.float64) if o.dtype.is_floating_point else None for o in outs]
    float_inputs = [v for v in tensors.values() if v.dtype.is_floating_point]
    loss = sum((o * w).sum() for o, w in zip(outs, ws) if w is not None)
    grads = torch.autograd.grad(loss, float_inputs, allow_unused=True) if torch.is_tensor(loss) else [None] * len(float_inputs)
    lines = ["  {name = %s, lua = %s," % (lua_string(name), lua_string(lua))]
    lines.append("   inputs = {%s}," % ", ".join("%s = %s" % (k, lua_tensor(v)) for k, v in tensors.items()))
    lines.append("   outputs = {%s}," % ", ".join(lua_tensor(o) for o in outs))
    lines.append("   ws = {%s}," % ", ".join(lua_tensor(w) if w is not None else "false" for w in ws))
    grad_text = []
    for (k, v), g in zip([(k, v) for k, v in tensors.items() if v.dtype.is_floating_point], grads):
        grad_text.append("%s = %s" % (k, lua_tensor(g if g is not None else torch.zeros_like(v))))
    lines.append("   grads = {%s}}," % ", ".join(grad_text))
    return "\n".join(lines)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    body = "\n".join(make_row(*row) for row in ROWS)
    text = ("-- oracle_data.lua: made by tests/oracle/make_oracle.py with PyTorch %s; do not edit.\n"
            "-- Each row: a Lua expression, its inputs (float64; int64 indices 1-based), PyTorch's outputs\n"
            "-- (several for a tuple; int64 ones 1-based), weights w per float output and the gradients of\n"
            "-- the sum of sum(output * w) for each float input.\n"
            "return {\n%s\n}\n" % (torch.__version__, body))
    with open(os.path.join(here, "oracle_data.lua"), "w") as f:
        f.write(text)
    print("wrote %d rows" % len(ROWS))


if __name__ == "__main__":
    main()
