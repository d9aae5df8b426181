#!/usr/bin/python3
"""make_oracle.py: PyTorch's values and gradients for tapedeck's Lua functions, as Lua data.

Run from the repository root, with any Python that has PyTorch (pip's torch, or Debian's
python3-torch; the first line of the data file records the version that made it):

    python3 tests/oracle/make_oracle.py

It writes tests/oracle/oracle_data.lua, which tests/lua/test_oracle.lua checks tapedeck against
(`ctest -R lua.test_oracle`). Each row is one call written twice: as PyTorch (a Python function of
the inputs) and as tapedeck's Lua (an expression over the same input names). Inputs are float64,
drawn at random (or given: an int64 tensor is an index, 0-based here and 1-based in Lua); the row
stores the outputs (a PyTorch tuple is several Lua returns; int64 outputs are indices, stored
1-based) and the gradient of the sum of sum(output * w) over the float outputs for each input (w:
random weights, stored too), so a wrong value or a wrong gradient anywhere in the output fails the
Lua test.

Each row draws its numbers from a seed made from the row itself (its name, Lua text and inputs:
row_key), not from one seed for the whole file, so adding, removing or moving a row changes that
row's data only and the diff of oracle_data.lua shows just it. Two rows may not have the same key.

A new function gets a row here (test_oracle fails for an op of the op table without one), then the
script is run again and its output committed (docs/design.md, "Adding an op").
"""
import hashlib
import os
import torch

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

def whole(shape):            # small whole numbers -2..2: ties and equalities (maximum's shared gradient, ne)
    return torch.randint(-2, 3, shape).double()

def zeros_positive(shape):   # zeros among positive values (pow at a zero base)
    x = positive(shape)
    x.view(-1)[::2] = 0
    return x

def special(shape):          # NaN, infinities, zeros and ordinary values (isnan, isinf, isfinite)
    pool = torch.tensor([float("nan"), float("inf"), float("-inf"), 0.0, -1.5, 2.25], dtype=torch.float64)
    return pool[torch.randint(0, len(pool), shape)]

def unit(shape):             # inside (0, 1): probabilities (binary_cross_entropy's input and target)
    return torch.rand(shape, dtype=torch.float64) * 0.9 + 0.05

DOMAINS = {"unit": unit, "any": any_values, "positive": positive, "ties": ties, "with_zeros": with_zeros, "whole": whole,
           "zeros_positive": zeros_positive, "special": special}
F = torch.nn.functional

def weights(*values):        # given float64 values that get no gradient (PyTorch refuses one for some weights)
    return torch.tensor(values, dtype=torch.float64)


def index(*rows):            # an int64 index, 0-based as PyTorch reads it
    return torch.tensor(rows, dtype=torch.int64)

def rnn_outputs(x, w):
    o = torch.zeros(3, 2, dtype=torch.float64)
    h = x[0]
    for t in range(3):
        h = torch.tanh(h * w)
        o[t] = h
    return o


def batch_norm_train(x, rm, rv, w, b):
    m, v = rm.detach().clone(), rv.detach().clone()
    return F.batch_norm(x, m, v, w, b, True, 0.2), m, v


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
def hooked_twice(x, y):
    h = x.sin()
    h.register_hook(lambda g: g * 3)
    h.register_hook(lambda g: g + y)
    return h * h + h


def hooked_view(x, y):
    v = (x * 2).t()
    v.register_hook(lambda g: None)
    v.register_hook(lambda g: g.clamp(-0.5, 0.5))
    return v.mm(y)


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
    # second derivatives: the gradient (create_graph) is itself differentiated
    ("autograd.grad", "torch.autograd.grad((x ^ 3 * y):sum(), x, {create_graph = true})",
     lambda x, y: torch.autograd.grad((x ** 3 * y).sum(), x, create_graph=True)[0],
     [("x", (2, 3), "any"), ("y", (2, 3), "any")]),
    ("autograd.grad", "torch.autograd.grad((x:tanh():mm(y):sigmoid()):sum(), y, {create_graph = true})",
     lambda x, y: torch.autograd.grad(torch.sigmoid(torch.tanh(x).mm(y)).sum(), y, create_graph=True)[0],
     [("x", (2, 3), "any"), ("y", (3, 2), "any")]),
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
    ("split", "table.unpack(x:split(2))", lambda x: x.split(2), [("x", (5, 3), "any")]),
    ("split", "table.unpack(x:split({1, 3, 1}))", lambda x: x.split([1, 3, 1]), [("x", (5, 3), "any")]),
    ("split", "table.unpack(torch.split(x, 2, 2))", lambda x: torch.split(x, 2, 1), [("x", (2, 3), "any")]),
    ("chunk", "table.unpack(x:chunk(2))", lambda x: x.chunk(2), [("x", (5, 3), "any")]),
    ("chunk", "table.unpack(x:chunk(3, 2))", lambda x: x.chunk(3, 1), [("x", (2, 7), "any")]),
    ("unbind", "table.unpack(x:unbind())", lambda x: x.unbind(), [("x", (3, 2), "any")]),
    ("unbind", "table.unpack(torch.unbind(x, 2))", lambda x: torch.unbind(x, 1), [("x", (3, 2), "any")]),
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
    # add and sub's alpha (keyword-only, as PyTorch): a + alpha b, and its gradient alpha for b
    ("add", "torch.add(x, y, {alpha = 5})", lambda x, y: torch.add(x, y, alpha=5), [("x", (2, 3), "any"), ("y", (3,), "any")]),
    ("add", "x:add(y, {alpha = -0.5})", lambda x, y: x.add(y, alpha=-0.5), [("x", (2, 3), "any"), ("y", (2, 3), "any")]),
    ("add", "x:add(2, {alpha = 3})", lambda x: x.add(2, alpha=3), [("x", (2, 3), "any")]),
    ("sub", "torch.sub(x, y, {alpha = 2.5})", lambda x, y: torch.sub(x, y, alpha=2.5), [("x", (2, 3), "any"), ("y", (2, 1), "any")]),
    ("sub", "x:sub(y, {alpha = 3})", lambda x, y: x.sub(y, alpha=3), [("x", (2, 3), "any"), ("y", (2, 3), "any")]),
    ("add", "(function() local z = x * 1; z:add_(y, {alpha = 3}); return z end)()", lambda x, y: (x * 1).add_(y, alpha=3),
     [("x", (2, 3), "any"), ("y", (2, 3), "any")]),
    ("sub", "(function() local z = x * 1; z:sub_(y, {alpha = 0.5}); return z end)()", lambda x, y: (x * 1).sub_(y, alpha=0.5),
     [("x", (2, 3), "any"), ("y", (3,), "any")]),
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
    # --- creation -------------------------------------------------------------------
    ("arange", "torch.arange(1, 10, 3)", lambda: Whole(torch.arange(1, 10, 3)), []),
    ("arange", "torch.arange(0, 1, 0.1)", lambda: torch.arange(0, 1, 0.1), []),
    ("arange", "torch.arange(5, 0, -1.5, {dtype = 'float64'})", lambda: torch.arange(5, 0, -1.5, dtype=torch.float64), []),
    ("arange", "torch.arange(7)", lambda: Whole(torch.arange(7)), []),
    ("linspace", "torch.linspace(-1, 2, 7, {dtype = 'float64'})", lambda: torch.linspace(-1, 2, 7, dtype=torch.float64), []),
    ("linspace", "torch.linspace(0, 1, 11)", lambda: torch.linspace(0, 1, 11), []),
    ("linspace", "torch.linspace(-3, 4, 4, {dtype = 'int64'})", lambda: Whole(torch.linspace(-3, 4, 4, dtype=torch.int64)), []),
    # a step whose separately rounded product gives -4.0 at [6] and whose fused multiply-add gives
    # -3.9999999999999996, truncated to -3: PyTorch's value (its kernels are compiled with FMA)
    ("linspace", "torch.linspace(-20, 4, 10, {dtype = 'int64'})", lambda: Whole(torch.linspace(-20, 4, 10, dtype=torch.int64)), []),
    ("zeros_like", "torch.zeros_like(x)", lambda x: torch.zeros_like(x), [("x", (2, 3), "any")]),
    ("ones_like", "torch.ones_like(x, {dtype = 'int64'})", lambda x: Whole(torch.ones_like(x, dtype=torch.int64)), [("x", (2, 3), "any")]),
    ("full_like", "torch.full_like(x, 2.5)", lambda x: torch.full_like(x, 2.5), [("x", (3,), "any")]),
    ("tril", "x:tril()", lambda x: x.tril(), [("x", (3, 4), "any")]),
    ("tril", "torch.tril(x, -1)", lambda x: torch.tril(x, -1), [("x", (2, 3, 4), "any")]),
    ("triu", "x:triu(1)", lambda x: x.triu(1), [("x", (4, 3), "any")]),
    ("triu", "torch.triu(x, {diagonal = -1})", lambda x: torch.triu(x, diagonal=-1), [("x", (2, 4, 3), "any")]),

    # --- elementwise ------------------------------------------------------------------
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
    ("pow", "x ^ 0", lambda x: x ** 0, [("x", (3, 4), "zeros_positive")]),
    ("pow", "x ^ 2", lambda x: x ** 2, [("x", (3, 4), "zeros_positive")]),
    ("pow", "x ^ y", lambda x, y: x ** y, [("x", (3, 4), "zeros_positive"), ("y", (3, 4), "positive")]),
    ("pow", "x ^ y", lambda x, y: x ** y, [("x", (3, 4), "positive"), ("y", (4,), "whole")]),
    # --- F's losses (nn.lua; reduction "mean", "sum", "none") -------------------------
    ("l1_loss", "F.l1_loss(x, y)", lambda x, y: F.l1_loss(x, y), [("x", (3, 4), "any"), ("y", (3, 4), "any")]),
    ("l1_loss", "F.l1_loss(x, y, {reduction = 'sum'})", lambda x, y: F.l1_loss(x, y, reduction="sum"), [("x", (3, 4), "any"), ("y", (3, 4), "any")]),
    ("l1_loss", "F.l1_loss(x, y, {reduction = 'none'})", lambda x, y: F.l1_loss(x, y, reduction="none"), [("x", (3, 4), "any"), ("y", (4,), "any")]),
    ("smooth_l1_loss", "F.smooth_l1_loss(x, y)", lambda x, y: F.smooth_l1_loss(x, y), [("x", (3, 4), "any"), ("y", (3, 4), "any")]),
    ("smooth_l1_loss", "F.smooth_l1_loss(x, y, {beta = 0.5, reduction = 'none'})", lambda x, y: F.smooth_l1_loss(x, y, beta=0.5, reduction="none"), [("x", (3, 4), "any"), ("y", (3, 4), "any")]),
    ("smooth_l1_loss", "F.smooth_l1_loss(x, y, {beta = 0, reduction = 'sum'})", lambda x, y: F.smooth_l1_loss(x, y, beta=0.0, reduction="sum"), [("x", (3, 4), "any"), ("y", (3, 4), "any")]),
    ("mse_loss", "F.mse_loss(x, y, {reduction = 'none'})", lambda x, y: F.mse_loss(x, y, reduction="none"), [("x", (3, 4), "any"), ("y", (3, 4), "any")]),
    ("binary_cross_entropy", "F.binary_cross_entropy(x, y)", lambda x, y: F.binary_cross_entropy(x, y), [("x", (3, 4), "unit"), ("y", (3, 4), "unit")]),
    ("binary_cross_entropy", "F.binary_cross_entropy(x, y, w, {reduction = 'none'})", lambda x, y, w: F.binary_cross_entropy(x, y, w, reduction="none"), [("x", (3, 4), "unit"), ("y", (3, 4), "unit"), ("w", weights(0.5, 1.5, 2.0, 0.8), None)]),
    ("binary_cross_entropy", "F.binary_cross_entropy(x, y, {weight = w, reduction = 'sum'})", lambda x, y, w: F.binary_cross_entropy(x, y, w, reduction="sum"), [("x", (3, 4), "unit"), ("y", (3, 4), "unit"), ("w", weights([0.5], [1.5], [2.0]), None)]),
    ("binary_cross_entropy_with_logits", "F.binary_cross_entropy_with_logits(x, y)", lambda x, y: F.binary_cross_entropy_with_logits(x, y), [("x", (3, 4), "any"), ("y", (3, 4), "unit")]),
    ("binary_cross_entropy_with_logits", "F.binary_cross_entropy_with_logits(x, y, w, {pos_weight = pw, reduction = 'none'})", lambda x, y, w, pw: F.binary_cross_entropy_with_logits(x, y, w, pos_weight=pw, reduction="none"), [("x", (3, 4), "any"), ("y", (3, 4), "unit"), ("w", weights([0.5], [1.5], [2.0]), None), ("pw", weights(0.5, 1.5, 2.0, 0.8), None)]),
    ("binary_cross_entropy_with_logits", "F.binary_cross_entropy_with_logits(x * 40, y, {pos_weight = pw, reduction = 'sum'})", lambda x, y, pw: F.binary_cross_entropy_with_logits(x * 40, y, pos_weight=pw, reduction="sum"), [("x", (3, 4), "any"), ("y", (3, 4), "unit"), ("pw", weights(0.5, 1.5, 2.0, 0.8), None)]),
    ("nll_loss", "F.nll_loss(x, t, w)", lambda x, t, w: F.nll_loss(x, t, w), [("x", (4, 3), "any"), ("t", index(2, 0, 1, 0), None), ("w", weights(0.5, 1.5, 2.0), None)]),
    ("nll_loss", "F.nll_loss(x, t, {ignore_index = 1, reduction = 'none'})", lambda x, t: F.nll_loss(x, t, ignore_index=0, reduction="none"), [("x", (4, 3), "any"), ("t", index(2, 0, 1, 0), None)]),
    ("nll_loss", "F.nll_loss(x, t, w, {ignore_index = 1})", lambda x, t, w: F.nll_loss(x, t, w, ignore_index=0), [("x", (4, 3), "any"), ("t", index(2, 0, 1, 0), None), ("w", weights(0.5, 1.5, 2.0), None)]),
    ("cross_entropy", "F.cross_entropy(x, t, w)", lambda x, t, w: F.cross_entropy(x, t, w), [("x", (4, 3), "any"), ("t", index(2, 0, 1, 0), None), ("w", weights(0.5, 1.5, 2.0), None)]),
    ("cross_entropy", "F.cross_entropy(x, t, {ignore_index = 3, reduction = 'sum'})", lambda x, t: F.cross_entropy(x, t, ignore_index=2, reduction="sum"), [("x", (4, 3), "any"), ("t", index(2, 0, 1, 2), None)]),
    ("cross_entropy", "F.cross_entropy(x, t, {reduction = 'none'})", lambda x, t: F.cross_entropy(x, t, reduction="none"), [("x", (4, 3), "any"), ("t", index(2, 0, 1, 2), None)]),
    ("cross_entropy", "F.cross_entropy(x, t, {label_smoothing = 0.2})", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.2), [("x", (4, 3), "any"), ("t", index(2, 0, 1, 2), None)]),
    ("cross_entropy", "F.cross_entropy(x, t, w, {label_smoothing = 0.3, ignore_index = 1})", lambda x, t, w: F.cross_entropy(x, t, w, ignore_index=0, label_smoothing=0.3), [("x", (4, 3), "any"), ("t", index(2, 0, 1, 2), None), ("w", weights(0.5, 1.5, 2.0), None)]),
    ("cross_entropy", "F.cross_entropy(x, t, {label_smoothing = 0.3, ignore_index = 1, reduction = 'none'})", lambda x, t: F.cross_entropy(x, t, ignore_index=0, label_smoothing=0.3, reduction="none"), [("x", (4, 3), "any"), ("t", index(2, 0, 1, 2), None)]),
    ("cross_entropy", "F.cross_entropy(x, t, {label_smoothing = 0.3, ignore_index = 1})", lambda x, t: F.cross_entropy(x, t, ignore_index=0, label_smoothing=0.3), [("x", (4, 3), "any"), ("t", index(2, 0, 1, 2), None)]),
    ("cross_entropy", "F.cross_entropy(x, t, {label_smoothing = 0.1, reduction = 'none'})", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1, reduction="none"), [("x", (3,), "any"), ("t", torch.tensor(1), None)]),
    ("cross_entropy", "F.cross_entropy(x, p)", lambda x, p: F.cross_entropy(x, p), [("x", (4, 3), "any"), ("p", (4, 3), "unit")]),
    ("cross_entropy", "F.cross_entropy(x, p, w, {label_smoothing = 0.2, reduction = 'sum'})", lambda x, p, w: F.cross_entropy(x, p, w, label_smoothing=0.2, reduction="sum"), [("x", (4, 3), "any"), ("p", (4, 3), "unit"), ("w", weights(0.5, 1.5, 2.0), None)]),
    ("cross_entropy", "F.cross_entropy(x, p, {reduction = 'none'})", lambda x, p: F.cross_entropy(x, p, reduction="none"), [("x", (4, 3), "any"), ("p", (4, 3), "unit")]),
    # [N, C, d1, ...] scores with [N, d1, ...] labels (sequence models), or probabilities of the scores' shape
    ("cross_entropy", "F.cross_entropy(x, t)", lambda x, t: F.cross_entropy(x, t), [("x", (2, 3, 4), "any"), ("t", index([2, 0, 1, 0], [1, 1, 2, 0]), None)]),
    ("cross_entropy", "F.cross_entropy(x, t, w, {ignore_index = 2, label_smoothing = 0.2})", lambda x, t, w: F.cross_entropy(x, t, w, ignore_index=1, label_smoothing=0.2), [("x", (2, 3, 4), "any"), ("t", index([2, 0, 1, 0], [1, 1, 2, 0]), None), ("w", weights(0.5, 1.5, 2.0), None)]),
    ("cross_entropy", "F.cross_entropy(x, t, {reduction = 'none', label_smoothing = 0.1})", lambda x, t: F.cross_entropy(x, t, reduction="none", label_smoothing=0.1), [("x", (2, 3, 2, 2), "any"), ("t", index([[0, 2], [1, 1]], [[2, 0], [0, 1]]), None)]),
    ("cross_entropy", "F.cross_entropy(x, p, {reduction = 'sum'})", lambda x, p: F.cross_entropy(x, p, reduction="sum"), [("x", (2, 3, 4), "any"), ("p", (2, 3, 4), "unit")]),
    ("cross_entropy", "nn.CrossEntropyLoss({ignore_index = 1})(x, t)", lambda x, t: torch.nn.CrossEntropyLoss(ignore_index=0)(x, t), [("x", (3, 4, 2), "any"), ("t", index([0, 3], [1, 0], [2, 2]), None)]),
    ("nll_loss", "F.nll_loss(x, t, w, {ignore_index = 3})", lambda x, t, w: F.nll_loss(x, t, w, ignore_index=2), [("x", (2, 3, 4), "any"), ("t", index([2, 0, 1, 0], [1, 1, 2, 0]), None), ("w", weights(0.5, 1.5, 2.0), None)]),
    ("nll_loss", "F.nll_loss(x, t, {reduction = 'none'})", lambda x, t: F.nll_loss(x, t, reduction="none"), [("x", (2, 3, 4), "any"), ("t", index([2, 0, 1, 0], [1, 1, 2, 0]), None)]),
    ("multi_margin_loss", "F.multi_margin_loss(x, t, 2, 0.5)", lambda x, t: F.multi_margin_loss(x, t, 2, 0.5), [("x", (4, 3), "any"), ("t", index(2, 0, 1, 0), None)]),
    ("multi_margin_loss", "F.multi_margin_loss(x, t, {weight = w, reduction = 'none'})", lambda x, t, w: F.multi_margin_loss(x, t, weight=w, reduction="none"), [("x", (4, 3), "any"), ("t", index(2, 0, 1, 0), None), ("w", weights(0.5, 1.5, 2.0), None)]),
    # --- F's NN functions ---------------------------------------------------------------
    ("dropout", "F.dropout(x, 0.5, false)", lambda x: F.dropout(x, 0.5, False), [("x", (3, 4), "any")]),
    ("dropout", "F.dropout(x, {p = 0})", lambda x: F.dropout(x, p=0.0), [("x", (3, 4), "any")]),
    ("layer_norm", "F.layer_norm(x, 4)", lambda x: F.layer_norm(x, (4,)), [("x", (3, 4), "any")]),
    ("layer_norm", "F.layer_norm(x, {3, 4}, w, b, 1e-3)", lambda x, w, b: F.layer_norm(x, (3, 4), w, b, 1e-3), [("x", (2, 3, 4), "any"), ("w", (3, 4), "any"), ("b", (3, 4), "any")]),
    ("batch_norm", "(function() local m, v = rm:detach():clone(), rv:detach():clone(); return F.batch_norm(x, m, v, w, b, true, 0.2), m, v end)()",
     lambda x, rm, rv, w, b: batch_norm_train(x, rm, rv, w, b),
     [("x", (4, 3, 2), "any"), ("rm", (3,), "any"), ("rv", (3,), "positive"), ("w", (3,), "any"), ("b", (3,), "any")]),
    ("batch_norm", "F.batch_norm(x, rm, rv, {weight = w, eps = 0.01})", lambda x, rm, rv, w: F.batch_norm(x, rm, rv, w, eps=0.01),
     [("x", (4, 3), "any"), ("rm", weights(0.1, -0.3, 0.2), None), ("rv", weights(0.5, 1.5, 2.0), None), ("w", (3,), "any")]),
    ("batch_norm", "F.batch_norm(x, nil, nil, {training = true})", lambda x: F.batch_norm(x, None, None, training=True), [("x", (2, 3, 2, 2), "any")]),
    ("embedding", "F.embedding(i, w)", lambda i, w: F.embedding(i, w), [("i", index([2, 0, 1], [0, 0, 3]), None), ("w", (4, 3), "any")]),
    ("one_hot", "F.one_hot(i, 4)", lambda i: Whole(F.one_hot(i, 4)), [("i", index([2, 0, 1], [0, 0, 3]), None)]),
    ("one_hot", "F.one_hot(i)", lambda i: Whole(F.one_hot(i)), [("i", index(2, 0, 1), None)]),
    ("normalize", "F.normalize(x)", lambda x: F.normalize(x), [("x", (3, 4), "any")]),
    ("normalize", "F.normalize(x, 1, 1)", lambda x: F.normalize(x, 1.0, 0), [("x", (3, 4), "any")]),
    ("normalize", "F.normalize(x, {p = 3, dim = -1})", lambda x: F.normalize(x, p=3.0, dim=-1), [("x", (2, 3, 4), "any")]),
    ("pad", "F.pad(x, {1, 2})", lambda x: F.pad(x, (1, 2)), [("x", (2, 3), "any")]),
    ("pad", "F.pad(x, {1, 0, -1, 2}, 'constant', 1.5)", lambda x: F.pad(x, (1, 0, -1, 2), "constant", 1.5), [("x", (2, 3), "any")]),
    ("pad", "F.pad(x, {2, 1, 1, 1}, {mode = 'reflect'})", lambda x: F.pad(x, (2, 1, 1, 1), mode="reflect"), [("x", (1, 2, 3, 4), "any")]),
    ("pad", "F.pad(x, {2, 1, 1, 3}, 'replicate')", lambda x: F.pad(x, (2, 1, 1, 3), "replicate"), [("x", (1, 2, 3, 4), "any")]),
    ("pad", "F.pad(x, {2, 1, 1, 3}, 'circular')", lambda x: F.pad(x, (2, 1, 1, 3), "circular"), [("x", (1, 2, 3, 4), "any")]),
    ("avg_pool2d", "F.avg_pool2d(x, 2)", lambda x: F.avg_pool2d(x, 2), [("x", (2, 2, 4, 5), "any")]),
    ("avg_pool2d", "F.avg_pool2d(x, {3, 2}, {2, 1}, 1)", lambda x: F.avg_pool2d(x, (3, 2), (2, 1), 1), [("x", (1, 2, 5, 4), "any")]),
    ("avg_pool2d", "F.avg_pool2d(x, 3, 2, {1, 1}, {count_include_pad = false})", lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), [("x", (2, 5, 6), "any")]),
    ("avg_pool2d", "F.avg_pool2d(x, 2, {divisor_override = 3})", lambda x: F.avg_pool2d(x, 2, divisor_override=3), [("x", (1, 1, 4, 4), "any")]),
    # conv2d and max_pool2d with PyTorch's window options (sizes a number or {h, w})
    ("conv2d", "F.conv2d(x, w, b, {2, 1}, {1, 2})", lambda x, w, b: F.conv2d(x, w, b, (2, 1), (1, 2)),
     [("x", (2, 3, 6, 5), "any"), ("w", (4, 3, 3, 2), "any"), ("b", (4,), "any")]),
    ("conv2d", "torch.conv2d(x, w, nil, 1, 2, {2, 1})", lambda x, w: F.conv2d(x, w, None, 1, 2, (2, 1)),
     [("x", (1, 2, 7, 6), "any"), ("w", (3, 2, 3, 3), "any")]),
    ("conv2d", "x:conv2d(w, b, {groups = 2, padding = 1, stride = {1, 2}})", lambda x, w, b: F.conv2d(x, w, b, (1, 2), 1, 1, 2),
     [("x", (2, 4, 5, 5), "any"), ("w", (6, 2, 3, 3), "any"), ("b", (6,), "any")]),
    ("conv2d", "F.conv2d(x, w, nil, {stride = 2, groups = 3})", lambda x, w: F.conv2d(x, w, None, 2, groups=3),
     [("x", (1, 3, 6, 6), "any"), ("w", (6, 1, 2, 2), "any")]),
    ("conv2d", "F.conv2d(x, w, b, 1, 'same')", lambda x, w, b: F.conv2d(x, w, b, 1, "same"),
     [("x", (1, 2, 5, 6), "any"), ("w", (3, 2, 3, 3), "any"), ("b", (3,), "any")]),
    ("conv2d", "F.conv2d(x, w, nil, {padding = 'same', dilation = {1, 2}})", lambda x, w: F.conv2d(x, w, None, padding="same", dilation=(1, 2)),
     [("x", (2, 2, 5, 6), "any"), ("w", (2, 2, 2, 3), "any")]),
    ("conv2d", "F.conv2d(x, w, nil, 1, 'valid', 1, 2)", lambda x, w: F.conv2d(x, w, None, 1, "valid", 1, 2),
     [("x", (1, 4, 4, 5), "any"), ("w", (2, 2, 3, 2), "any")]),
    ("conv2d", "F.conv2d(x, w, b, {padding = {0, 1}, dilation = 2})", lambda x, w, b: F.conv2d(x, w, b, padding=(0, 1), dilation=2),
     [("x", (3, 6, 5), "any"), ("w", (2, 3, 2, 2), "any"), ("b", (2,), "any")]),
    ("max_pool2d", "F.max_pool2d(x, 3, 2, 1)", lambda x: F.max_pool2d(x, 3, 2, 1), [("x", (2, 2, 5, 6), "any")]),
    ("max_pool2d", "F.max_pool2d(x, 2, {ceil_mode = true})", lambda x: F.max_pool2d(x, 2, ceil_mode=True), [("x", (1, 2, 5, 5), "any")]),
    ("max_pool2d", "x:max_pool2d({3, 2}, {1, 2})", lambda x: F.max_pool2d(x, (3, 2), (1, 2)), [("x", (1, 1, 6, 5), "any")]),
    ("max_pool2d", "torch.max_pool2d(x, 2, 1, 0, 2)", lambda x: F.max_pool2d(x, 2, 1, 0, 2), [("x", (1, 2, 6, 6), "any")]),
    ("max_pool2d", "F.max_pool2d(x, {2, 3}, {stride = {2, 1}, padding = {1, 1}, dilation = {1, 2}, ceil_mode = true})",
     lambda x: F.max_pool2d(x, (2, 3), (2, 1), (1, 1), (1, 2), ceil_mode=True), [("x", (3, 5, 7), "any")]),
    ("max_pool2d", "F.max_pool2d(x, 3, {stride = 2, padding = 1, return_indices = true})",
     lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), [("x", (2, 1, 5, 6), "any")]),
    ("max_pool2d", "F.max_pool2d(x, 2, 2, 1, 1, true, true)", lambda x: F.max_pool2d(x, 2, 2, 1, 1, True, True),
     [("x", (2, 5, 4), "any")]),
    ("register_hook", "(function() local h = x:sin(); h:register_hook(function(g) return g * 3 end); "
     "h:register_hook(function(g) return g + y end); return h * h + h end)()", hooked_twice,
     [("x", (2, 3), "any"), ("y", (2, 3), "any")]),
    ("register_hook", "(function() local v = (x * 2):t(); v:register_hook(function(g) end); "
     "v:register_hook(function(g) return g:clamp(-0.5, 0.5) end); return v:mm(y) end)()", hooked_view,
     [("x", (2, 3), "any"), ("y", (2, 2), "any")]),
]


def lua_number(v):
    if v != v:
        return "0/0"
    if v in (float("inf"), float("-inf")):
        return "1/0" if v > 0 else "-1/0"
    return repr(float(v))


def lua_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Whole:
    """An int64 result that holds values, not indices (arange's): written as it is, not 1-based."""
    def __init__(self, t):
        self.t = t


def lua_tensor(t, indices=True):
    """A tensor as Lua data; int64 ones are indices, written 1-based (unless indices is False);
    float32 ones say their dtype (float64 is the default)."""
    if t.dtype == torch.int64:
        values = ", ".join(str(v + 1 if indices else v) for v in t.reshape(-1).tolist())
        dtype = ', dtype = "int64"'
    else:
        values = ", ".join(lua_number(v) for v in t.detach().reshape(-1).tolist())
        dtype = ', dtype = "float32"' if t.dtype == torch.float32 else ""
    shape = ", ".join(str(d) for d in t.shape)
    return "{shape = {%s}, values = {%s}%s}" % (shape, values, dtype)


def row_key(name, lua, inputs):
    """The row as text: its name, its Lua and its inputs (name, shape, domain; a given tensor's
    values). Unique per row; the seed of its random numbers."""
    parts = []
    for input_name, shape, domain in inputs:
        given = isinstance(shape, torch.Tensor)
        parts.append("%s %s %s" % (input_name, shape.tolist() if given else list(shape), "given" if given else domain))
    return "%s | %s | %s" % (name, lua, ", ".join(parts))


def seed_row(key):
    """Seeds PyTorch's generator from the row's key alone (a stable hash, not Python's hash(),
    which changes from run to run), so a row's numbers do not depend on the rows before it."""
    torch.manual_seed(int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:7], "little"))


def make_row(name, lua, fn, inputs):
    seed_row(row_key(name, lua, inputs))
    tensors = {}
    for input_name, shape, domain in inputs:
        if isinstance(shape, torch.Tensor):   # given: an index
            tensors[input_name] = shape
        else:
            tensors[input_name] = DOMAINS[domain](shape).requires_grad_(True)
    result = fn(*tensors.values())
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    as_indices = [not isinstance(o, Whole) for o in outs]
    outs = [o.t if isinstance(o, Whole) else o for o in outs]
    # tapedeck has no bool dtype: a comparison's 1 and 0 are in the inputs' float dtype (float64 here)
    outs = [o.to(torch.float64) if o.dtype == torch.bool else o for o in outs]
    ws = [torch.randn(o.shape, dtype=torch.float64) if o.dtype.is_floating_point else None for o in outs]
    float_inputs = [v for v in tensors.values() if v.requires_grad]   # a given float tensor gets no gradient
    loss = sum((o * w).sum() for o, w in zip(outs, ws) if w is not None)
    differentiable = torch.is_tensor(loss) and loss.requires_grad   # not so for isnan's, a creation's
    grads = torch.autograd.grad(loss, float_inputs, allow_unused=True) if differentiable else [None] * len(float_inputs)
    lines = ["  {name = %s, lua = %s," % (lua_string(name), lua_string(lua))]
    lines.append("   inputs = {%s}," % ", ".join("%s = %s" % (k, lua_tensor(v)) for k, v in tensors.items()))
    lines.append("   outputs = {%s}," % ", ".join(lua_tensor(o, i) for o, i in zip(outs, as_indices)))
    lines.append("   ws = {%s}," % ", ".join(lua_tensor(w) if w is not None else "false" for w in ws))
    grad_text = []
    for (k, v), g in zip([(k, v) for k, v in tensors.items() if v.requires_grad], grads):
        grad_text.append("%s = %s" % (k, lua_tensor(g if g is not None else torch.zeros_like(v))))
    lines.append("   grads = {%s}}," % ", ".join(grad_text))
    return "\n".join(lines)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    keys = [row_key(name, lua, inputs) for name, lua, _, inputs in ROWS]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    assert not twice, "rows with the same key (and so the same numbers): %s" % twice
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
