-- Creating tensors: torch.tensor, zeros/ones/full/rand/randn, eye, arange, manual_seed.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

-- torch.tensor from a number: a 0-d float32 tensor
local s = torch.tensor(3)
check.shape(s, {})
check.equal(s.dtype, "float32")
check.equal(s:item(), 3.0)
check.equal(s:dim(), 0)
check.equal(s:numel(), 1)

-- torch.tensor from flat and nested tables
local v = torch.tensor({1, 2, 3})
check.shape(v, {3})
check.close(v, {1, 2, 3})
local m = torch.tensor({{1, 2, 3}, {4, 5, 6}})
check.shape(m, {2, 3})
check.close(m, {{1, 2, 3}, {4, 5, 6}})
check.shape(torch.tensor({{{1}, {2}}, {{3}, {4}}}), {2, 2, 1})
check.shape(torch.tensor({}), {0})

-- options: requires_grad and dtype
local g = torch.tensor({1.5, 2.5}, {requires_grad = true, dtype = "float64"})
check.equal(g.dtype, "float64")
check.equal(g.requires_grad, true)
check.equal(g.is_leaf, true)
check.close(g, {1.5, 2.5})
check.equal(torch.tensor({1, 2}).requires_grad, false)
local i = torch.tensor({7, 8}, {dtype = "int64"})
check.equal(i.dtype, "int64")
check.equal(math.type(i:totable()[1]), "integer")
check.equal(math.type(torch.tensor({7}):item()), "float")

-- torch.tensor(t) copies into a new leaf
local copy = torch.tensor(m)
check.close(copy, m)
assert(copy.node ~= m.node)
copy:add_(1)
check.close(m, {{1, 2, 3}, {4, 5, 6}}, 0, "the original is not changed by the copy")

-- zeros / ones with sizes as varargs or as one table, and options after them
for _, make in ipairs({torch.zeros, torch.ones}) do
  local a, b = make(2, 3), make({2, 3})
  check.shape(a, {2, 3})
  check.shape(b, {2, 3})
  check.close(a, b)
  check.shape(make(4), {4})
  check.shape(make(), {})
  local d = make(2, 2, {dtype = "float64", requires_grad = true})
  check.equal(d.dtype, "float64")
  check.equal(d.requires_grad, true)
  check.equal(make({3}, {dtype = "int64"}).dtype, "int64")
end
check.close(torch.zeros(2, 2), {0, 0, 0, 0})
check.close(torch.ones(2, 2), {1, 1, 1, 1})
check.close(torch.full({2, 2}, 7), {7, 7, 7, 7})

-- rand in [0, 1); randn is roughly standard normal
local r = torch.rand(1000)
check.shape(r, {1000})
for _, x in ipairs(r:totable()) do assert(x >= 0 and x < 1, "rand out of [0,1): " .. x) end
check.shape(torch.rand({2, 5}), {2, 5})
check.shape(torch.randn(3, 4, 5), {3, 4, 5})
local n = torch.randn(10000)
assert(math.abs(n:mean():item()) < 0.05, "randn mean")
assert(math.abs(((n * n):mean():item()) - 1) < 0.1, "randn variance")
check.equal(torch.randn(2, {dtype = "float64"}).dtype, "float64")

-- manual_seed makes rand/randn reproducible; another seed gives other numbers
torch.manual_seed(42)
local r1, n1 = torch.rand(5), torch.randn(5)
torch.manual_seed(42)
local r2, n2 = torch.rand(5), torch.randn(5)
check.close(r1, r2, 0)
check.close(n1, n2, 0)
torch.manual_seed(43)
local r3 = torch.rand(5)
assert(r3:totable()[1] ~= r1:totable()[1], "another seed gives other numbers")

-- eye: square or n x m
check.close(torch.eye(3), {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}})
check.close(torch.eye(2, 3), {{1, 0, 0}, {0, 1, 0}})
check.equal(torch.eye(2, {dtype = "float64"}).dtype, "float64")

-- arange: 0 .. n-1, int64 unless asked otherwise
local ar = torch.arange(5)
check.equal(ar.dtype, "int64")
check.close(ar, {0, 1, 2, 3, 4})
check.equal(torch.arange(3, {dtype = "float32"}).dtype, "float32")

-- tostring shows values, size and options
check.equal(tostring(torch.tensor({1, 2})), "tensor([1., 2.], size=[2])")
check.equal(tostring(torch.tensor(3)), "tensor(3.)")
check.equal(tostring(torch.tensor({1, 2}, {dtype = "float64", requires_grad = true})),
            "tensor([1., 2.], size=[2], dtype=float64, requires_grad=true)")
check.equal(tostring(torch.arange(3)), "tensor([0, 1, 2], size=[3], dtype=int64)")

print("test_creation: ok")
