-- Tensor hooks (x:register_hook(fn)): when they run, what their result does, how they go away,
-- and the errors. The gradients a hook changes are also checked against PyTorch in the oracle
-- (tests/oracle: the register_hook rows).
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

-- A hook on a leaf changes what reaches .grad; its handle takes it off; removing twice is harmless.
do
  local x = torch.tensor({1, 2, 3}, {requires_grad = true})
  local handle = x:register_hook(function(g) return g * 10 end)
  check.equal(tostring(handle):match("^RemovableHandle") ~= nil, true, "a handle prints as one")
  ;(x * x):sum():backward()
  check.close(x.grad, {20, 40, 60}, 1e-12, "leaf hook: .grad is 10 * 2x")
  handle:remove()
  handle:remove()
  x.grad = nil
  ;(x * x):sum():backward()
  check.close(x.grad, {2, 4, 6}, 1e-12, "after remove(): the plain gradient")
end

-- A tensor used twice: its hook runs once, with the sum of both uses' gradients; hooks run in the
-- order they were added, each seeing what the one before returned; nil keeps the gradient.
do
  local x = torch.tensor({1, 2}, {requires_grad = true})
  local h = x * 3
  local calls, seen = {}, {}
  h:register_hook(function(g) calls[#calls + 1] = "first"; seen[1] = g:clone(); return g + 1 end)
  h:register_hook(function(g) calls[#calls + 1] = "second"; seen[2] = g:clone() end)
  h:register_hook(function(g) calls[#calls + 1] = "third"; return g * 2 end)
  ;(h * h + h):sum():backward()
  check.equal(table.concat(calls, " "), "first second third", "each hook once, in order")
  check.close(seen[1], {7, 13}, 1e-12, "the first hook sees 2h + 1 (both uses summed)")
  check.close(seen[2], {8, 14}, 1e-12, "the second sees what the first returned")
  check.close(x.grad, {48, 84}, 1e-12, "x.grad = 3 * 2 * (2h + 2)")
end

-- An in-place write: a hook added before it gets the gradient of the old value (zero where it was
-- overwritten), one added after gets the new value's (PyTorch 2's documented rule).
do
  local a = torch.tensor({1, 2, 3}, {requires_grad = true})
  local x = a * 2
  local old, new
  x:register_hook(function(g) old = g:clone() end)
  x[1] = 5
  x:register_hook(function(g) new = g:clone() end)
  ;(x * torch.tensor({1, 2, 3})):sum():backward()
  check.close(old, {0, 2, 3}, 0, "the hook from before the write")
  check.close(new, {1, 2, 3}, 0, "the hook from after it")
  check.close(a.grad, {0, 4, 6}, 0, "a's gradient")
end

-- retain_grad keeps the hooked gradient (PyTorch 2: retain_grad's own hook runs after the tensor's).
do
  local x = torch.tensor({1, 2}, {requires_grad = true})
  local h = x * 1
  h:retain_grad()
  h:register_hook(function(g) return g * 5 end)
  h:sum():backward()
  check.close(h.grad, {5, 5}, 0, "the retained .grad is the hooked one")
  check.close(x.grad, {5, 5}, 0, "and so is what flows on")
end

-- No gradient reaches the tensor: its hook is not called.
do
  local x = torch.randn(3, {requires_grad = true})
  local unused = x * 2
  local called = false
  unused:register_hook(function() called = true end)
  ;(x * 5):sum():backward()
  check.equal(called, false, "a hook on a tensor the loss does not use is not called")
end

-- The hook stays with the tensor's node, not with the Lua variable: it runs after the variable is
-- gone, and its function is let go once the node is.
do
  local functions = setmetatable({}, {__mode = "k"})
  local x = torch.tensor({1, 2}, {requires_grad = true})
  local count = 0
  local loss
  do
    local h = x * 2
    local fn = function(g) count = count + 1; return g * 0 end
    functions[fn] = true
    h:register_hook(fn)
    loss = h:sum()
  end
  collectgarbage(); collectgarbage()
  loss:backward()
  check.equal(count, 1, "the hook ran with no variable naming its tensor")
  check.close(x.grad, {0, 0}, 0, "and its result was used")
  loss = nil
  collectgarbage(); collectgarbage()
  check.equal(next(functions), nil, "the hook's function is released with its node")
end

-- A training loop that hooks an intermediate every step does not grow.
do
  local w = torch.randn(8, 8, {requires_grad = true})
  local function step()
    local h = torch.randn(4, 8):mm(w)
    h:register_hook(function(g) return g:clamp(-1, 1) end)
    h:tanh():sum():backward()
    w.grad = nil
  end
  for _ = 1, 200 do step() end
  collectgarbage(); collectgarbage()
  local _, nodes_before = torch.memory()
  local lua_before = collectgarbage("count")
  for _ = 1, 2000 do step() end
  collectgarbage(); collectgarbage()
  local _, nodes_after = torch.memory()
  check.equal(nodes_after <= nodes_before, true, "live nodes after 2000 hooked steps: " .. nodes_after .. " vs " .. nodes_before)
  check.equal(collectgarbage("count") < lua_before + 64, true, "Lua memory after 2000 hooked steps (KB): " ..
    collectgarbage("count") .. " vs " .. lua_before)
end

-- torch.autograd.grad gives the gradient the tensor's hooks made (PyTorch 2's rule: hooks on the
-- tensors asked for run before their gradient is taken).
do
  local x = torch.tensor({1, 2}, {requires_grad = true})
  local h = x * 1
  h:register_hook(function(g) return g * 10 end)
  local gh = torch.autograd.grad((h * h):sum(), h)
  check.close(gh, {20, 40}, 1e-12, "autograd.grad: the hooked gradient of h")
  local gx = torch.autograd.grad((h * h):sum(), x)
  check.close(gx, {20, 40}, 1e-12, "autograd.grad: the hooked gradient flows on to x")
  check.equal(x.grad, nil, "autograd.grad leaves .grad alone")
end

-- With create_graph the ops a hook runs are recorded with autograd on: second derivatives see them.
do
  local x = torch.tensor({1, 2}, {requires_grad = true})
  local h = x ^ 2
  h:register_hook(function(g) return g * h end)   -- dL/dx = h * 2x = 2x^3
  local gx = torch.autograd.grad(h:sum(), x, {create_graph = true})
  check.close(gx, {2, 16}, 1e-12, "the hook's product is in the gradient")
  gx:sum():backward()
  -- PyTorch 1.13 and 2.x give [6, 72]: the second pass flows through h again, so the hook runs again
  -- (multiplying by h the gradient that reaches h from the hook's own product).
  check.close(x.grad, {6, 72}, 1e-12, "its second derivative, as PyTorch's")
end

-- The ops a hook runs are recorded in the backward group of the hooked tensor's node.
do
  local x = torch.tensor({1, 2}, {requires_grad = true})
  local h = x:exp()
  local scaled
  h:register_hook(function(g) scaled = g * 7; return scaled end)
  h:sum():backward()
  local record
  for _, n in ipairs(torch.tape()) do if n.id == scaled.node then record = n end end
  check.equal(record.op, "mul_scalar", "the hook's op is on the tape")
  check.equal(record.phase, "backward", "as a backward node")
  check.equal(record.group, h.node, "in the group of the hooked tensor's node")
end

-- Errors: each names register_hook (or backward, for what goes wrong inside the pass), and the
-- pass that failed leaves everything usable.
do
  check.fails("register_hook", "does not require grad", function() torch.ones(2):register_hook(function() end) end)
  check.fails("register_hook", "must be a function", function() torch.ones(2, {requires_grad = true}):register_hook(5) end)
  local y = torch.ones(2, {requires_grad = true})
  check.fails("register_hook", "unexpected argument", function() y:register_hook(function() end, 2) end)
  local x = torch.tensor({1, 2}, {requires_grad = true})
  local h = x * 2
  local wrong = h:register_hook(function(g) return g:sum() end)
  check.fails("backward", "returned a [] float32 gradient for a [2] float32 one", function() h:sum():backward() end)
  wrong:remove()
  local kind = h:register_hook(function() return "big" end)
  check.fails("backward", "returned a string", function() h:sum():backward() end)
  kind:remove()
  local raising = h:register_hook(function() error("my hook is broken") end)
  local message = check.fails("backward", "my hook is broken", function() h:sum():backward() end)
  check.equal(message:find("hook on tensor #" .. h.node, 1, true) ~= nil, true, "the message names the tensor: " .. message)
  raising:remove()
  h:sum():backward()
  check.close(x.grad, {2, 2}, 1e-12, "after the failed passes a new one works")
  local nested = h:register_hook(function(g) h:sum():backward() end)
  check.fails("backward", "has not finished", function() h:sum():backward() end)
  nested:remove()
  check.fails("remove", "RemovableHandle", function() local handle = x:register_hook(function() end); handle.remove(5) end)
end

print("hooks ok")
