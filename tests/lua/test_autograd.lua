-- Autograd end to end: backward on a scalar, backward(grad) otherwise, accumulation, retain_grad,
-- detach, torch.no_grad(fn) and `local _ <close> = torch.no_grad()`.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

-- backward on a scalar: d/dw sum(w*w) = 2w
local w = torch.tensor({{1, 2}, {3, 4}}, {requires_grad = true})
local loss = (w * w):sum()
loss:backward()
check.close(w.grad, {{2, 4}, {6, 8}})

-- a second backward accumulates into .grad
local loss2 = (w * w):sum()
loss2:backward()
check.close(w.grad, {{4, 8}, {12, 16}})
w.grad:zero_()
check.close(w.grad, {{0, 0}, {0, 0}})

-- backward(grad) on a non-scalar: vector-Jacobian product; torch.backward(t, grad) is the same
local v = torch.tensor({1, 2, 3}, {requires_grad = true})
local y = v * v
y:backward(torch.tensor({1, 0.5, 2}))
check.close(v.grad, {2, 2, 12})
v.grad = nil
torch.backward(v * 3, torch.ones(3))
check.close(v.grad, {3, 3, 3})

-- chain rule through several ops: mm, tanh, sum, broadcasting add of a bias
local x = torch.tensor({{1, 2}}, {dtype = "float64"})
local W = torch.tensor({{0.5, -1}, {0.25, 2}}, {dtype = "float64", requires_grad = true})
local bias = torch.tensor({0.1, -0.2}, {dtype = "float64", requires_grad = true})
local h = (x:mm(W) + bias):tanh()
local out = h:sum()
out:backward()
local pre = {1 * 0.5 + 2 * 0.25 + 0.1, 1 * -1 + 2 * 2 - 0.2}
local dpre = {1 - math.tanh(pre[1]) ^ 2, 1 - math.tanh(pre[2]) ^ 2}
check.close(bias.grad, dpre, 1e-9)
check.close(W.grad, {{1 * dpre[1], 1 * dpre[2]}, {2 * dpre[1], 2 * dpre[2]}}, 1e-9)
check.equal(W.grad.dtype, "float64")

-- gradients of softmax + log: d/dz -log softmax(z)[k] = softmax(z) - onehot(k)
local z = torch.tensor({{1, 2, 3}}, {requires_grad = true})
local nll = -(z:log_softmax(2):gather(2, torch.tensor({{3}}, {dtype = "int64"}))):sum()
nll:backward()
local p = torch.softmax(z:detach(), 2):totable()[1]
check.close(z.grad, {{p[1], p[2], p[3] - 1}}, 1e-5)

-- gradients through max (to the arg max), clamp (zero where clamped), pow, mean, division
local q = torch.tensor({1, 5, 3}, {requires_grad = true})
q:max():backward()
check.close(q.grad, {0, 1, 0})
q.grad = nil
q:clamp{min = 2, max = 4}:sum():backward()
check.close(q.grad, {0, 0, 1})
q.grad = nil
q:pow(3):mean():backward()
check.close(q.grad, {1, 25, 9})   -- 3 q^2 / 3
q.grad = nil
;(1 / q):sum():backward()
check.close(q.grad, {-1, -1 / 25, -1 / 9})

-- a tensor used twice gets the sum of both paths
local u = torch.tensor({2}, {requires_grad = true})
;(u * u + u * 3):sum():backward()
check.close(u.grad, {7})

-- retain_grad keeps the gradient of a non-leaf; plain non-leaves keep none
local a = torch.tensor({1, 2}, {requires_grad = true})
local mid = a * 2
mid:retain_grad()
local other = a * 5
;(mid * other):sum():backward()
check.close(mid.grad, {5, 10})      -- d/dmid = other = 5a
check.close(a.grad, {20, 40})       -- 2 * 5a + 5 * 2a
check.equal(other.grad, nil)

-- detach: same values, a leaf outside the graph (no gradient flows through it)
local b = torch.tensor({3}, {requires_grad = true})
local d = (b * 2):detach()
check.equal(d.requires_grad, false)
check.equal(d.is_leaf, true)
check.close(d, {6})
;(b * d):sum():backward()
check.close(b.grad, {6})   -- d is a constant

-- torch.no_grad(fn, ...): fn runs without recording gradients and its results are returned
check.equal(torch.is_grad_enabled(), true)
local r1, r2, r3 = torch.no_grad(function(s, t)
  return (b * s).requires_grad, torch.is_grad_enabled(), s + t
end, 2, 3)
check.equal(r1, false)
check.equal(r2, false)
check.equal(r3, 5)
check.equal(torch.is_grad_enabled(), true)

-- an error inside no_grad(fn) propagates unchanged and grad mode comes back
local ok, message = pcall(torch.no_grad, function() error("inside", 0) end)
check.equal(ok, false)
check.equal(message, "inside")
check.equal(torch.is_grad_enabled(), true)

-- `local _ <close> = torch.no_grad()` turns grad mode off to the end of the block, errors included
do
  local _ <close> = torch.no_grad()
  check.equal(torch.is_grad_enabled(), false)
  check.equal((b * 2).requires_grad, false)
end
check.equal(torch.is_grad_enabled(), true)
check.equal((b * 2).requires_grad, true)
pcall(function()
  local _ <close> = torch.no_grad()
  error("leaving by error")
end)
check.equal(torch.is_grad_enabled(), true)

-- nested: enable_grad inside no_grad
torch.no_grad(function()
  local inner = torch.enable_grad(function() return (b * 2).requires_grad end)
  check.equal(inner, true)
  check.equal(torch.is_grad_enabled(), false)
end)

-- set_grad_enabled
torch.set_grad_enabled(false)
check.equal((b * 2).requires_grad, false)
torch.set_grad_enabled(true)
check.equal((b * 2).requires_grad, true)

-- a small training loop drives a loss down
torch.manual_seed(0)
local X = torch.randn(16, 3)
local target = X:mm(torch.tensor({{1}, {-2}, {0.5}}))
local theta = torch.zeros(3, 1, {requires_grad = true})
local first
for step = 1, 200 do
  local err = X:mm(theta) - target
  local l = (err * err):mean()
  first = first or l:item()
  theta.grad = nil
  l:backward()
  torch.no_grad(function() theta:sub_(theta.grad, 0.1) end)
end
local last = ((X:mm(theta) - target) ^ 2):mean():item()
assert(last < first * 1e-3, string.format("loss went from %g to %g", first, last))
check.close(theta, {{1}, {-2}, {0.5}}, 1e-2)

print("test_autograd: ok")
