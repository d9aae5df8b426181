-- Lua operators on tensors: + - * / ^ and unary minus, with a tensor or a number on either side.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

local a = torch.tensor({{1, 2}, {3, 4}})
local b = torch.tensor({{2, 2}, {2, 2}})

-- tensor (op) tensor
check.close(a + b, {{3, 4}, {5, 6}})
check.close(a - b, {{-1, 0}, {1, 2}})
check.close(a * b, {{2, 4}, {6, 8}})
check.close(a / b, {{0.5, 1}, {1.5, 2}})
check.close(a ^ b, {{1, 4}, {9, 16}})
check.close(a ^ a, {{1, 4}, {27, 256}}, 1e-5)

-- tensor (op) number
check.close(a + 1, {{2, 3}, {4, 5}})
check.close(a - 1, {{0, 1}, {2, 3}})
check.close(a * 3, {{3, 6}, {9, 12}})
check.close(a / 2, {{0.5, 1}, {1.5, 2}})
check.close(a ^ 2, {{1, 4}, {9, 16}})
check.close(a ^ 0.5, {{1, math.sqrt(2)}, {math.sqrt(3), 2}})

-- number (op) tensor
check.close(1 + a, {{2, 3}, {4, 5}})
check.close(10 - a, {{9, 8}, {7, 6}})
check.close(3 * a, {{3, 6}, {9, 12}})
check.close(12 / a, {{12, 6}, {4, 3}})
check.close(2 ^ a, {{2, 4}, {8, 16}})

-- unary minus, and combinations in one expression
check.close(-a, {{-1, -2}, {-3, -4}})
check.close(-(-a), a)
check.close(2 * a - a / 2 + 1, {{2.5, 4}, {5.5, 7}})
check.close((a + 1) * (a - 1), {{0, 3}, {8, 15}})

-- broadcasting between a matrix and a row / a column
check.close(a + torch.tensor({10, 20}), {{11, 22}, {13, 24}})
check.close(a * torch.tensor({{10}, {100}}), {{10, 20}, {300, 400}})

-- the result is a new tensor; the operands are unchanged
local c = a + 1
assert(c.node ~= a.node)
check.close(a, {{1, 2}, {3, 4}}, 0)

-- int64 tensors stay int64 with integer numbers, become float with fractions or division
local i = torch.arange(3)
check.equal((i + 1).dtype, "int64")
check.close(i + 1, {1, 2, 3})
check.equal((i * 0.5).dtype, "float32")
check.equal((i / 2).dtype, "float32")

-- # is the size of dim 1; t[i] is the i-th slice along dim 1 (1-based, negative from the end)
check.equal(#a, 2)
check.close(a[1], {1, 2})
check.close(a[2], {3, 4})
check.close(a[-1], {3, 4})
check.equal(torch.tensor({5, 6, 7})[2]:item(), 6.0)

-- tensor ^ tensor is elementwise pow: a negative base with a whole exponent is exact, as torch.pow
check.close(torch.tensor({-2, 3}) ^ torch.tensor({2, 2}), {4, 9})
do
  local b = torch.tensor({-2}, {requires_grad = true})
  ;(b ^ torch.tensor({3})):sum():backward()
  check.close(b.grad, {12})   -- 3 b^2
end

print("test_operators: ok")
