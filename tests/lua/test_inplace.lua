-- In-place methods add_ sub_ mul_ zero_ copy_ fill_: they change the tensor and return it; on a
-- leaf that requires grad they are refused, except inside torch.no_grad (an optimizer step).
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

-- each method changes the tensor and returns the same tensor (so calls chain)
local x = torch.tensor({1, 2, 3})
local node = x.node
assert(rawequal(x:add_(1), x), "add_ returns self")
check.close(x, {2, 3, 4})
x:add_(torch.tensor({1, 1, 1}), 2)   -- x += 2 * other
check.close(x, {4, 5, 6})
x:sub_(1)
check.close(x, {3, 4, 5})
x:sub_(torch.tensor({1, 2, 3}))
check.close(x, {2, 2, 2})
x:mul_(3)
check.close(x, {6, 6, 6})
x:mul_(torch.tensor({1, 2, 3}))
check.close(x, {6, 12, 18})
x:fill_(7)
check.close(x, {7, 7, 7})
x:copy_(torch.tensor({9, 8, 7}))
check.close(x, {9, 8, 7})
x:copy_(torch.tensor(5))   -- a 0-d source broadcasts
check.close(x, {5, 5, 5})
x:zero_():add_(1):mul_(4)
check.close(x, {4, 4, 4})
check.equal(x.node, node, "in place keeps the node id")

-- in place on a computed tensor does not touch the operands it came from
local base = torch.ones(2, 2)
local y = base * 2
y:add_(1)
check.close(base, {1, 1, 1, 1})
check.close(y, {3, 3, 3, 3})

-- refused on a leaf that requires grad ...
local w = torch.tensor({1, 2}, {requires_grad = true})
check.fails("add_", "leaf that requires grad", function() w:add_(1) end)
check.fails("sub_", "leaf that requires grad", function() w:sub_(1) end)
check.fails("zero_", "leaf that requires grad", function() w:zero_() end)
check.fails("fill_", "leaf that requires grad", function() w:fill_(0) end)
check.fails("copy_", "leaf that requires grad", function() w:copy_(torch.zeros(2)) end)
local ok, message = pcall(function() w:mul_(2) end)
assert(not ok and message:find("leaf that requires grad", 1, true), message)
check.close(w, {1, 2}, 0, "w is unchanged after the refusals")

-- ... but allowed inside torch.no_grad(fn) and under `local _ <close> = torch.no_grad()`
torch.no_grad(function()
  w:sub_(torch.tensor({0.5, 0.5}))
  w:mul_(2)
end)
check.close(w, {1, 3})
do
  local _ <close> = torch.no_grad()
  w:add_(1)
  w:fill_(0.25)
end
check.close(w, {0.25, 0.25})
check.equal(w.requires_grad, true, "still requires grad")
check.fails("add_", "leaf that requires grad", function() w:add_(1) end)   -- grad mode is back

-- an optimizer step: w -= lr * grad, then zero the gradient
local p = torch.tensor({1, 2}, {requires_grad = true})
;(p * p):sum():backward()
torch.no_grad(function() p:sub_(p.grad, 0.5) end)   -- p - 0.5 * 2p = 0
check.close(p, {0, 0})
p.grad:zero_()
check.close(p.grad, {0, 0})

-- changing a tensor that backward still needs is caught when backward runs
local v = torch.tensor({1, 2}, {requires_grad = true})
local t = v:tanh()
t:mul_(2)
local bad_ok, bad_message = pcall(function() t:sum():backward() end)
assert(not bad_ok and bad_message:find("in-place", 1, true), tostring(bad_message))

-- mul_ by a number on a leaf that requires grad names mul_, the method the script called
do
  local w = torch.ones(2, {requires_grad = true})
  check.fails("mul_", "leaf that requires grad", function() w:mul_(2) end)
  torch.no_grad(function() w:mul_(3) end)
  check.close(w, {3, 3})
end

-- an int64 tensor changed in place by a fraction is refused, not silently truncated (as PyTorch)
do
  local counts = torch.tensor({1, 2}, {dtype = "int64"})
  counts:add_(1)
  counts:mul_(3)
  check.close(counts, {6, 9})
  check.fails("add_", "int64 but the value is float64", function() counts:add_(0.5) end)
  check.fails("add_", "int64 but the value is float32", function() counts:add_(torch.ones(2)) end)
  check.close(counts, {6, 9})
end
print("test_inplace: ok")
