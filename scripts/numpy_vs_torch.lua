-- numpy_vs_torch.lua: the lecture's "Numpy vs PyTorch" graph, a = x*y, b = a+z, c = sum(b),
-- differentiated twice: by hand (as the numpy version does) and by autograd. They must agree.
--   tapedeck scripts/numpy_vs_torch.lua

torch.manual_seed(0)
local N, D = 3, 4
local x = torch.randn(N, D, {requires_grad = true})
local y = torch.randn(N, D, {requires_grad = true})
local z = torch.randn(N, D, {requires_grad = true})

local a = x * y
local b = a + z
local c = b:sum()

-- By hand, walking the graph backwards from c (the numpy code of the lecture).
local grad_c = 1.0
local grad_b = torch.ones(N, D) * grad_c
local grad_a = grad_b:clone()
local grad_z = grad_b:clone()
local grad_x = grad_a * y:detach()
local grad_y = grad_a * x:detach()

-- By autograd.
c:backward()

print(("c = %.6f"):format(c:item()))
local function max_difference(p, q) return (p - q):abs():max():item() end
for _, row in ipairs({{"x", grad_x, x.grad}, {"y", grad_y, y.grad}, {"z", grad_z, z.grad}}) do
  local name, by_hand, by_autograd = row[1], row[2], row[3]
  print(("grad_%s by hand:"):format(name))
  print(by_hand)
  print(("grad_%s by autograd:"):format(name))
  print(by_autograd)
  local difference = max_difference(by_hand, by_autograd)
  print(("max |difference| = %g"):format(difference))
  assert(difference < 1e-6, "the two gradients of " .. name .. " differ")
end
print("hand-written and autograd gradients agree")
