-- freeze: a frozen function gives what the eager one gives (outputs, every gradient, updated
-- parameters), with every pass on, with each pass off in turn, and after save + load.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

local pass_configs = {
  {}, {dce = false}, {cse = false}, {fold = false}, {fuse = false}, {inplace = false}, {reuse = false}, {all = false},
}

local function pack(...) return {n = select("#", ...), ...} end

-- Tensors a run can change: what it returned, the parameters and their gradients.
local function observed(results, params)
  local out = {}
  for i = 1, results.n do if torch.is_tensor(results[i]) then out[#out + 1] = results[i] end end
  for _, p in ipairs(params) do
    out[#out + 1] = p
    out[#out + 1] = p.grad or "nil"
  end
  return out
end

local function same(a, b, what)
  check.equal(#a, #b, what .. ": count")
  for i = 1, #a do
    if a[i] == "nil" or b[i] == "nil" then check.equal(a[i] == "nil", b[i] == "nil", what .. ": item " .. i .. " nil")
    else check.close(b[i], a[i], 1e-5, what .. ": item " .. i) end
  end
end

-- make() builds a workload {fn, args = {...}, params = {...}}; two copies from the same seed run
-- side by side, one eagerly and one frozen, for `calls` calls.
local function eager_equals_frozen(name, make, calls)
  for _, passes in ipairs(pass_configs) do
    torch.manual_seed(7)
    local E = make()
    torch.manual_seed(7)
    local F = make()
    local args = F.args
    local f = torch.freeze{passes = passes, F.fn, table.unpack(args, 1, #args)}
    if #args == 0 then f() end   -- the table form without arguments records at the first call
    local eager = pack(E.fn(table.unpack(E.args, 1, #E.args)))
    local label = name
    for k, v in pairs(passes) do label = label .. " " .. k .. "=" .. tostring(v) end
    same(observed(pack(), E.params), observed(pack(), F.params), label .. " (the recording run)")
    for call = 1, calls do
      eager = pack(E.fn(table.unpack(E.args, 1, #E.args)))
      local frozen = pack(f(table.unpack(args, 1, #args)))
      same(observed(eager, E.params), observed(frozen, F.params), label .. " call " .. call)
    end
    check.equal(f:stats().records, 1, label .. ": recorded once")
  end
end

-- W2: the RNN cell, gradients cleared inside the function.
eager_equals_frozen("rnn_cell", function()
  local W_h, W_x = torch.randn(20, 20, {requires_grad = true}), torch.randn(20, 10, {requires_grad = true})
  local x, prev_h = torch.randn(1, 10), torch.randn(1, 20)
  return {params = {W_h, W_x}, args = {x, prev_h}, fn = function(x, prev_h)
    W_h.grad = nil
    W_x.grad = nil
    local next_h = (torch.mm(W_h, prev_h:t()) + torch.mm(W_x, x:t())):tanh()
    local loss = next_h:sum()
    loss:backward()
    return loss, next_h
  end}
end, 3)

-- W3: 50 unrolled steps; gradients accumulate across calls (never cleared).
eager_equals_frozen("rnn_unrolled", function()
  local W_h, W_x = (torch.randn(20, 20) * 0.1):requires_grad_(true), torch.randn(20, 10, {requires_grad = true})
  local xs = torch.randn(50, 10)
  return {params = {W_h, W_x}, args = {xs, torch.zeros(20, 1)}, fn = function(xs, h)
    for t = 1, 50 do h = (W_h:mm(h) + W_x:mm(xs:narrow(1, t, 1):t())):tanh() end
    h:sum():backward()
  end}
end, 2)

-- W4: a training step with the SGD update under no_grad inside the function.
eager_equals_frozen("two_layer_net", function()
  local x, y = torch.randn(16, 50), torch.randn(16, 5)
  local w1, w2 = torch.randn(50, 20, {requires_grad = true}), torch.randn(20, 5, {requires_grad = true})
  return {params = {w1, w2}, args = {x, y}, fn = function(x, y)
    local loss = (x:mm(w1):clamp{min = 0}:mm(w2) - y):pow(2):sum()
    loss:backward()
    torch.no_grad(function()
      w1:sub_(w1.grad, 1e-4)
      w2:sub_(w2.grad, 1e-4)
      w1.grad:zero_()
      w2.grad:zero_()
    end)
    return loss
  end}
end, 4)

-- W5: forward only, bias rows broadcast (fused), MSE.
eager_equals_frozen("dense_forward", function()
  local x, y = torch.randn(8, 30), torch.randn(8, 30)
  local W1, b1 = torch.randn(30, 12, {requires_grad = true}), torch.randn(12, {requires_grad = true})
  local W2, b2 = torch.randn(12, 30, {requires_grad = true}), torch.randn(30, {requires_grad = true})
  return {params = {W1, b1, W2, b2}, args = {x, y}, fn = function(x, y)
    local pred = (x:mm(W1) + b1):relu():mm(W2) + b2
    return (pred - y):pow(2):mean()
  end}
end, 2)

-- Issue 12's elementwise functions: the activations, maximum/minimum and clamp with tensor bounds
-- are fused (their elementwise.def lines), where and tril run as kernel steps; values and every
-- gradient replay equal to eager.
eager_equals_frozen("activations_where_clamp", function()
  local x = torch.randn(8, 6)
  local w = torch.randn(6, 6, {requires_grad = true})
  local lo, hi = torch.full({6}, -0.5), torch.rand(6) + 0.5
  local functional = torch.nn.functional
  return {params = {w}, args = {x}, fn = function(x)
    w.grad = nil
    local h = x:mm(w)
    local a = functional.gelu(h) + functional.silu(h) * functional.softplus(h, {beta = 2}) - functional.elu(h, 0.5)
              + functional.leaky_relu(h, 0.1)
    local b = torch.where(h:gt(0), torch.maximum(a, h), torch.minimum(a, h:clamp(lo, hi)))
    local loss = (b + functional.gelu(a, {approximate = "tanh"})):tril(1):pow(2):sum()
    loss:backward()
    return loss, b:isfinite() + b:ne(0)
  end}
end, 2)
do
  local h = torch.randn(4, 5)
  local f = torch.freeze(function(h)
    return F.gelu(h) + F.silu(h) * F.softplus(h) - F.elu(h) + F.leaky_relu(h):maximum(h):clamp_min(h * 0.5)
  end, h)
  local plan = f:plan()
  for _, op in ipairs({"gelu", "silu", "softplus", "elu", "leaky_relu", "maximum", "clamp_min"}) do
    check.equal(plan:find("fused%([^\n]*[= ]" .. op .. "%(") ~= nil, true, op .. " is in the fused group")
  end
  check.close(f(h), F.gelu(h) + F.silu(h) * F.softplus(h) - F.elu(h) + F.leaky_relu(h):maximum(h):clamp_min(h * 0.5), 0)
end
-- Reductions and shape functions (lua_reduce_shape_ops.cpp): an attention-like step through
-- einsum, logsumexp, max's indices, topk, chunk, stack, flip, roll, amax, var, norm, cumsum, prod,
-- sort, index_select and tile, with its gradient.
eager_equals_frozen("reduce_shape_ops", function()
  local x = torch.randn(2, 3, 4)
  local w = torch.randn(4, 4, {requires_grad = true})
  return {params = {w}, args = {x}, fn = function(x)
    w.grad = nil
    local q = torch.matmul(x, w)                                     -- [2,3,4]
    local s = torch.einsum("bqd,bkd->bqk", q, x) / 2                 -- [2,3,3]
    local p = (s - s:logsumexp(3, {keepdim = true})):exp()
    local best, where = p:max(3)
    local halves = q:chunk(2, 3)
    local stacked = torch.stack({halves[1], halves[2]:flip(3)}, 1):roll(1, 2)
    local loss = p:var(3):sum() + best:sum() + p:topk(2, 3):sum() + stacked:amax({1, 3}):sum() + q:norm()
      + (q / 10):cumsum(2):prod(3):mean() + q:sort(2, true):narrow(2, 1, 1):sum()
      + q:index_select(2, where:flatten():narrow(1, 1, 2)):tile(1, 2, 1):mean()
    loss:backward()
    return loss, where
  end}
end, 3)

-- The lecture's MyReLU: a torch.Function is replayed through the ops it ran (no Lua at replay).
local MyReLU = torch.Function{
  name = "MyReLU",
  forward = function(ctx, x) ctx:save_for_backward(x); return x:clamp{min = 0} end,
  backward = function(ctx, grad_y)
    local x = ctx.saved_tensors[1]
    local grad_input = grad_y:clone()
    grad_input[x:lt(0)] = 0
    return grad_input
  end,
}
local forward_calls = 0
local Counted = torch.Function{name = "Counted", forward = function(ctx, x) forward_calls = forward_calls + 1; return x * 2 end,
                               backward = function(ctx, g) return g * 2 end}
eager_equals_frozen("custom_relu", function()
  local x, y = torch.randn(16, 30), torch.randn(16, 4)
  local w1, w2 = torch.randn(30, 10, {requires_grad = true}), torch.randn(10, 4, {requires_grad = true})
  return {params = {w1, w2}, args = {x, y}, fn = function(x, y)
    local loss = (Counted.apply(MyReLU.apply(x:mm(w1))):mm(w2) - y):pow(2):sum()
    loss:backward()
    return loss
  end}
end, 2)
local before = forward_calls
do
  local w = torch.randn(3, {requires_grad = true})
  local f = torch.freeze(function(x) local l = Counted.apply(x * w):sum(); l:backward(); return l end, torch.ones(3))
  before = forward_calls
  f(torch.ones(3)); f(torch.ones(3))
  check.equal(forward_calls, before, "a frozen custom function does not call its Lua forward")
end

-- A tensor hook that clips an intermediate's gradient: the plan replays the ops the hook ran (its
-- Lua function is not called again, as a custom function's forward is not).
local hook_calls = 0
eager_equals_frozen("tensor_hook", function()
  local x, y = torch.randn(6, 5), torch.randn(6, 3)
  local w1, w2 = torch.randn(5, 4, {requires_grad = true}), torch.randn(4, 3, {requires_grad = true})
  return {params = {w1, w2}, args = {x, y}, fn = function(x, y)
    w1.grad = nil
    w2.grad = nil
    local h = x:mm(w1):tanh()
    h:register_hook(function(g) hook_calls = hook_calls + 1; return g:clamp(-0.05, 0.05) * 3 end)
    local loss = (h:mm(w2) - y):pow(2):sum()
    loss:backward()
    return loss
  end}
end, 2)
do
  local w = torch.randn(3, {requires_grad = true})
  local f = torch.freeze(function(x)
    local h = x * w
    h:register_hook(function(g) hook_calls = hook_calls + 1; return g * 2 end)
    local l = h:sum(); l:backward(); return l
  end, torch.ones(3))
  local before = hook_calls
  w.grad = nil
  f(torch.ones(3))
  check.equal(hook_calls, before, "a frozen call does not call the hook's Lua function")
  check.close(w.grad, {2, 2, 2}, 1e-6, "but replays what it computed")
end

-- nn.Sequential with SGD inside the step (optimizer:zero_grad sets .grad = nil: replayed).
eager_equals_frozen("nn_sgd", function()
  local model = nn.Sequential(nn.Linear(10, 8), nn.ReLU(), nn.Linear(8, 3))
  local opt = optim.SGD(model:parameters(), {lr = 0.01, momentum = 0})
  local x, y = torch.randn(4, 10), torch.randn(4, 3)
  return {params = model:parameters(), args = {x, y}, fn = function(x, y)
    opt:zero_grad()
    local loss = (model(x) - y):pow(2):mean()
    loss:backward()
    opt:step()
    return loss
  end}
end, 3)

-- The lecture's scalar graph and the numpy-vs-torch graph (gradients accumulate across calls).
eager_equals_frozen("scalar", function()
  local a, b = torch.tensor(15.0, {requires_grad = true}), torch.tensor(20.0, {requires_grad = true})
  return {params = {a, b}, args = {}, fn = function() local c = a * b; c:backward(); return c end}
end, 2)
eager_equals_frozen("numpy_vs_torch", function()
  local x, y, z = torch.randn(3, 4, {requires_grad = true}), torch.randn(3, 4, {requires_grad = true}),
                  torch.randn(3, 4, {requires_grad = true})
  return {params = {x, y, z}, args = {}, fn = function() local c = (x * y + z):sum(); c:backward(); return c end}
end, 2)

-- The two-layer net with gradients by hand (no autograd; masked assignment, in-place updates).
eager_equals_frozen("two_layer_net_manual", function()
  local x, y = torch.randn(16, 30), torch.randn(16, 4)
  local w1, w2 = torch.randn(30, 10), torch.randn(10, 4)
  return {params = {w1, w2}, args = {x, y}, fn = function(x, y)
    local h = x:mm(w1)
    local h_relu = h:clamp{min = 0}
    local y_pred = h_relu:mm(w2)
    local loss = (y_pred - y):pow(2):sum()
    local grad_y_pred = (y_pred - y) * 2.0
    local grad_w2 = h_relu:t():mm(grad_y_pred)
    local grad_h = grad_y_pred:mm(w2:t()):clone()
    grad_h[h:lt(0)] = 0
    local grad_w1 = x:t():mm(grad_h)
    w1:sub_(grad_w1, 1e-4)
    w2:sub_(grad_w2, 1e-4)
    return loss
  end}
end, 3)

-- The lecture's ParallelBlock in nn.Sequential (SGD here: Adam's step counter is Lua state, see docs/freeze.md).
eager_equals_frozen("parallel_block", function()
  local Block = nn.Module:extend("Block")
  function Block:init(d_in, d_out) self.linear1 = nn.Linear(d_in, d_out); self.linear2 = nn.Linear(d_in, d_out) end
  function Block:forward(x) return (self.linear1(x) * self.linear2(x)):clamp{min = 0} end
  local model = nn.Sequential(Block(12, 8), Block(8, 8), nn.Linear(8, 3))
  local opt = optim.SGD(model, {lr = 1e-3, momentum = 0.9})
  local x, y = torch.randn(6, 12), torch.randn(6, 3)
  return {params = model:parameters(), args = {x, y}, fn = function(x, y)
    local loss = (model(x) - y):pow(2):mean()
    loss:backward()
    return loss
  end}
end, 2)

-- The sigmoid neuron with retain_grad: a returned tensor's .grad comes back too.
do
  local w = torch.tensor({1, -2, 1}, {requires_grad = true, dtype = "float64"})
  local function neuron(x)
    local z = (w:narrow(1, 1, 2) * x):sum() + w[3]
    z:retain_grad()
    local f = 1 / (1 + (-z):exp())
    f:backward()
    return f, z
  end
  local x = torch.tensor({-1, 1}, {dtype = "float64"})
  local fr = torch.freeze(neuron, x)
  w.grad = nil
  local f1, z1 = fr(x)
  check.close(f1, 0.1192029, 1e-6, "neuron f")
  check.close(z1.grad, 0.1049936, 1e-6, "neuron z.grad")
  check.close(w.grad, {-0.1049936, 0.1049936, 0.1049936}, 1e-6, "neuron w.grad")
end

-- Parameters are captured by identity: an update made outside between calls is seen.
do
  local w = torch.ones(3)
  local f = torch.freeze(function(x) return x * w end, torch.ones(3))
  torch.no_grad(function() w:mul_(5) end)
  check.close(f(torch.ones(3)), {5, 5, 5}, 0, "in-place update of a captured tensor is seen")
end

-- Outputs are new tensors each call (a plan never hands out its own buffers twice).
do
  local f = torch.freeze(function(x) return x * 2 end, torch.ones(2))
  local a = f(torch.ones(2))
  local b = f(torch.ones(2) * 3)
  check.close(a, {2, 2}, 0, "first output kept")
  check.close(b, {6, 6}, 0, "second output")
  local t = f(torch.ones(2))
  local u = f(t)
  check.close(t, {2, 2}, 0, "an output passed back in is not overwritten")
  check.close(u, {4, 4}, 0)
end

-- Return values: tables of tensors and plain values are rebuilt each call.
do
  local f = torch.freeze(function(x) return {double = x * 2, list = {x + 1}, label = "ok"}, 7 end, torch.ones(2))
  local r, n = f(torch.ones(2) * 3)
  check.close(r.double, {6, 6}, 0)
  check.close(r.list[1], {4, 4}, 0)
  check.equal(r.label, "ok")
  check.equal(n, 7)
end

-- Views in a plan, as in eager: x:t() shares x's bytes, so a write through it changes x, and a
-- returned view is a view of the input (the plan gives it no bytes of its own).
do
  local w = torch.randn(4, 4, {requires_grad = true})
  local f = torch.freeze(function(x)
    w.grad = nil
    local loss = w:mm(x:t()):tanh():sum()
    loss:backward()
    local bumped = x:t()
    bumped:add_(1)                            -- writes into x
    return loss, x:t()
  end, torch.ones(1, 4))
  local x = torch.tensor({{1, 2, 3, 4}})
  local expected = w:mm(x:t()):tanh():sum():item()
  local loss = f(x)
  check.close(loss, expected, 1e-6, "the frozen loss")
  check.close(x, {{2, 3, 4, 5}}, 0, "the write through the view reached the input, as in eager")
  local _, returned = f(x)
  returned:mul_(10)
  check.close(x, {{30, 40, 50, 60}}, 0, "the returned transpose is a view of the input")
end

-- .grad = nil every call: the cleared .grad that nothing else holds is the next call's new one,
-- overwritten; one a caller kept keeps its values.
do
  local w = torch.randn(3, 3, {requires_grad = true})
  local f = torch.freeze(function(x)
    w.grad = nil
    w:mm(x):sum():backward()
  end, torch.ones(3, 1))
  local x1, x2 = torch.ones(3, 1), torch.tensor({{1}, {2}, {3}})
  f(x1)
  local kept = w.grad
  f(x2)
  check.close(kept, torch.ones(3, 1):mm(x1:t()), 0, "a kept .grad keeps the first call's values")
  check.close(w.grad, torch.ones(3, 1):mm(x2:t()), 0, "the new .grad has the second call's")
  check.equal(kept.node ~= w.grad.node, true, "a kept .grad is not reused")
  kept = nil
  local id = w.grad.node
  collectgarbage()
  collectgarbage()
  f(x1)
  check.equal(w.grad.node, id, "nothing else held the cleared .grad: it is the new one")
  check.close(w.grad, torch.ones(3, 1):mm(x1:t()), 0, "the recycled .grad holds the third call's values")
end


-- The lecture's cell unrolled 50 steps in float32: backward sums W_h's outer-product gradients,
-- and the plan adds each product straight into the sum (Y += A B). Each product is rounded before
-- it is added, as eager does, so frozen and eager agree to the bit (a fused multiply-add did not).
do
  local W_h, W_x = torch.randn(20, 20):requires_grad_(), torch.randn(20, 10):requires_grad_()
  local xs = {}
  for t = 1, 50 do xs[t] = torch.randn(10, 1) end
  local function unrolled(h0)
    W_h.grad, W_x.grad = nil, nil
    local h = h0
    for t = 1, 50 do h = (W_h:mm(h) + W_x:mm(xs[t])):tanh() end
    h:sum():backward()
    return h
  end
  local f = torch.freeze{unrolled, torch.randn(20, 1)}
  check.equal(f:timeit(1).max_diff, 0, "frozen unrolled cell against eager")
end

print("test_freeze: ok")
