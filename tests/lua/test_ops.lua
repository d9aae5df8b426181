-- Every op, called both as torch.f(x, ...) and as x:f(...), against values worked out by hand.
-- Dims are 1-based; negative dims count from the end.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

local a = torch.tensor({{1, 2}, {3, 4}})
local b = torch.tensor({{5, 6}, {7, 8}})
local m23 = torch.tensor({{1, 2, 3}, {4, 5, 6}})

-- Call op both ways and check both results against `expected`.
local function both(op, expected, x, ...)
  check.close(torch[op](x, ...), expected, 1e-5, "torch." .. op)
  check.close(x[op](x, ...), expected, 1e-5, "x:" .. op)
end

-- matrix products: mm, matmul (2-d and batched), bmm
local ab = {{19, 22}, {43, 50}}
both("mm", ab, a, b)
check.close(a:mm(b), ab)
both("matmul", ab, a, b)
check.shape(torch.mm(m23, m23:t()), {2, 2})
local batch = torch.tensor({{{1, 2}, {3, 4}}, {{1, 0}, {0, 1}}})
both("bmm", {{{19, 22}, {43, 50}}, {{5, 6}, {7, 8}}}, batch, torch.tensor({{{5, 6}, {7, 8}}, {{5, 6}, {7, 8}}}))
check.close(batch:matmul(b), {{{19, 22}, {43, 50}}, {{5, 6}, {7, 8}}}, 1e-5, "3-d matmul 2-d")

-- t and transpose
both("t", {{1, 4}, {2, 5}, {3, 6}}, m23)
check.shape(torch.ones(3):t(), {3})
both("transpose", {{1, 4}, {2, 5}, {3, 6}}, m23, 1, 2)
check.shape(torch.ones(2, 3, 4):transpose(1, -1), {4, 3, 2})

-- reductions: sum / mean / max, over everything or along a dim, with keepdim
both("sum", 21, m23)
both("sum", {5, 7, 9}, m23, 1)
both("sum", {6, 15}, m23, 2)
both("sum", {6, 15}, m23, -1)
check.shape(m23:sum(2, true), {2, 1})
check.shape(m23:sum(1, true), {1, 3})
check.shape(m23:sum(2, false), {2})
both("mean", 3.5, m23)
both("mean", {2.5, 3.5, 4.5}, m23, 1)
both("max", 6, m23)
local values, indices = m23:max(2)
check.close(values, {3, 6})
check.close(indices, {3, 3})   -- 1-based
check.equal(indices.dtype, "int64")
values, indices = torch.max(torch.tensor({{9, 2, 3}, {1, 8, 7}}), 1)
check.close(values, {9, 8, 7})
check.close(indices, {1, 2, 2})
values, indices = m23:max(-1, true)
check.shape(values, {2, 1})
check.shape(indices, {2, 1})

-- elementwise: clamp (table or positional bounds), pow, tanh, exp, log, sqrt, abs, sign, sigmoid, relu, neg
local x = torch.tensor({-2, -0.5, 0, 1, 3})
both("clamp", {0, 0, 0, 1, 3}, x, {min = 0})
both("clamp", {-2, -0.5, 0, 1, 1}, x, {max = 1})
both("clamp", {-1, -0.5, 0, 1, 2}, x, -1, 2)
both("clamp", {-1, -0.5, 0, 1, 2}, x, {min = -1, max = 2})
both("pow", {4, 0.25, 0, 1, 9}, x, 2)
both("tanh", {math.tanh(-2), math.tanh(-0.5), 0, math.tanh(1), math.tanh(3)}, x)
both("exp", {math.exp(-2), math.exp(-0.5), 1, math.exp(1), math.exp(3)}, x)
both("log", {0, math.log(2), math.log(4)}, torch.tensor({1, 2, 4}))
both("sqrt", {1, 2, 3}, torch.tensor({1, 4, 9}))
both("abs", {2, 0.5, 0, 1, 3}, x)
both("sign", {-1, -1, 0, 1, 1}, x)
both("sigmoid", {0.5, 1 / (1 + math.exp(-1))}, torch.tensor({0, 1}))
both("relu", {0, 0, 0, 1, 3}, x)
both("neg", {2, 0.5, 0, -1, -3}, x)

-- softmax / log_softmax along a dim
local e1, e2 = math.exp(1), math.exp(2)
both("softmax", {{1 / (1 + e1), e1 / (1 + e1)}, {1 / (1 + e1), e1 / (1 + e1)}}, a, 2)
both("softmax", {{1 / (1 + e2), 1 / (1 + e2)}, {e2 / (1 + e2), e2 / (1 + e2)}}, a, 1)
check.close(torch.softmax(m23, -1):sum(2), {1, 1})
both("log_softmax", {{-math.log(1 + e1), 1 - math.log(1 + e1)}, {-math.log(1 + e1), 1 - math.log(1 + e1)}}, a, 2)
check.close(m23:log_softmax(1):exp():sum(1), {1, 1, 1})

-- cat along a dim (default 1), narrow (1-based start)
check.close(torch.cat({a, b}), {{1, 2}, {3, 4}, {5, 6}, {7, 8}})
check.close(torch.cat({a, b}, 1), {{1, 2}, {3, 4}, {5, 6}, {7, 8}})
check.close(torch.cat({a, b}, 2), {{1, 2, 5, 6}, {3, 4, 7, 8}})
check.close(torch.cat({a, b}, -1), {{1, 2, 5, 6}, {3, 4, 7, 8}})
check.shape(torch.cat({torch.ones(1, 3), torch.ones(2, 3), torch.ones(3, 3)}), {6, 3})
both("narrow", {{2, 3}, {5, 6}}, m23, 2, 2, 2)
both("narrow", {{4, 5, 6}}, m23, 1, 2, 1)

-- reshape / view (sizes as varargs or a table), unsqueeze / squeeze, expand
both("reshape", {{1, 2}, {3, 4}, {5, 6}}, m23, 3, 2)
both("reshape", {1, 2, 3, 4, 5, 6}, m23, {6})
check.close(m23:view(1, 6), {{1, 2, 3, 4, 5, 6}}, 0, "view")   -- a method only, as in PyTorch
check.shape(m23:unsqueeze(1), {1, 2, 3})
check.shape(m23:unsqueeze(3), {2, 3, 1})
check.shape(m23:unsqueeze(-1), {2, 3, 1})
check.shape(torch.unsqueeze(m23, 2), {2, 1, 3})
check.shape(torch.ones(1, 3, 1):squeeze(), {3})
check.shape(torch.ones(1, 3, 1):squeeze(1), {3, 1})
check.shape(torch.squeeze(torch.ones(1, 3, 1), -1), {1, 3})
both("expand", {{1, 2}, {1, 2}, {1, 2}}, torch.tensor({{1, 2}}), 3, 2)

-- gather with 1-based int64 indices (as max returns them)
local index = torch.tensor({{2, 1}, {1, 1}}, {dtype = "int64"})
both("gather", {{2, 1}, {3, 3}}, a, 2, index)
both("gather", {{3, 2}, {1, 2}}, a, 1, index)
local _, argmax = m23:max(2, true)
check.close(m23:gather(2, argmax), {{3}, {6}})

-- eq: 1 where equal, 0 elsewhere; against a tensor or a number
both("eq", {{0, 1}, {0, 0}}, a, 2)
both("eq", {{1, 1}, {1, 1}}, a, a)
both("eq", {{0, 0}, {0, 0}}, a, b)

-- add / sub / mul / div as functions and methods, with tensors or numbers
both("add", {{6, 8}, {10, 12}}, a, b)
both("add", {{2, 3}, {4, 5}}, a, 1)
both("sub", {{-4, -4}, {-4, -4}}, a, b)
both("mul", {{5, 12}, {21, 32}}, a, b)
both("mul", {{2, 4}, {6, 8}}, a, 2)
both("div", {{0.5, 1}, {1.5, 2}}, a, 2)
check.close(torch.sub(1, a), {{0, -1}, {-2, -3}})
check.close(torch.div(12, a), {{12, 6}, {4, 3}})
check.close(torch.add(torch.ones(2, 3), torch.tensor({1, 2, 3})), {{2, 3, 4}, {2, 3, 4}}, 0, "broadcast")

-- clone, detach, dtype conversions
both("clone", {{1, 2}, {3, 4}}, a)
both("detach", {{1, 2}, {3, 4}}, a)
check.equal(a:double().dtype, "float64")
check.equal(a:long().dtype, "int64")
check.equal(a:to("float64").dtype, "float64")
check.equal(torch.arange(3):float().dtype, "float32")
check.close(torch.tensor({1.7, -1.7}):long(), {1, -1})

-- matmul takes vectors as PyTorch does: matrix @ vector, vector @ matrix, vector @ vector
do
  local m = torch.tensor({{1, 2}, {3, 4}})
  local v = torch.tensor({1, 1})
  check.close(torch.matmul(m, v), {3, 7})
  check.close(v:matmul(m), {4, 6})
  check.close(v:matmul(v), 2)
  assert(v:matmul(v):dim() == 0)
  local batch = torch.ones(3, 2, 2)
  assert(torch.matmul(batch, v).shape[1] == 3 and torch.matmul(batch, v).shape[2] == 2)
  assert(torch.matmul(m, batch).shape[1] == 3)
  check.fails("matmul", "[2,2] and [3]", function() torch.matmul(m, torch.ones(3)) end)
  local a = torch.tensor({{1, 2}, {3, 4}}, {requires_grad = true})
  torch.matmul(a, v):sum():backward()
  check.close(a.grad, {{1, 1}, {1, 1}})
end

print("test_ops: ok")
