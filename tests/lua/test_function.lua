-- torch.Function: autograd functions written in Lua (the lecture's MyReLU), one node each way.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua"); torch.autograd.keep_backward_graph(true)   -- (checks read backward nodes)

local MyReLU = torch.Function{
  name = "MyReLU",
  forward = function(ctx, x)
    ctx:save_for_backward(x)
    return x:clamp{min = 0}
  end,
  backward = function(ctx, grad_y)
    local x = ctx.saved_tensors[1]
    local grad_input = grad_y:clone()
    grad_input[x:lt(0)] = 0
    return grad_input
  end,
}

local x = torch.tensor({-1, 2, -3, 4}, {requires_grad = true})
local y = MyReLU.apply(x)
check.close(y, {0, 2, 0, 4})
assert(tostring(y.grad_fn):find("MyReLU", 1, true), tostring(y.grad_fn))
local loss = (y * 3):sum()
loss:backward()
check.close(x.grad, {0, 3, 0, 3})
check.close(MyReLU(x), {0, 2, 0, 4})   -- calling the definition is apply

-- On the tape: the function node, its clamp inside it (own line), the backward node and its ops.
local by_op = {}
for _, n in ipairs(torch.graph(loss)) do by_op[n.op] = n end
local forward_node, backward_node = by_op.MyReLU, by_op["MyReLU.backward"]
assert(forward_node and backward_node, "function nodes on the graph")
assert(by_op.clamp.group == forward_node.id, "clamp is inside MyReLU")
assert(by_op.clamp.where:match("test_function.lua:8$"), by_op.clamp.where)
assert(backward_node.group == forward_node.id and backward_node.phase == "backward")
assert(by_op.masked_fill_.group == backward_node.id, "the backward's ops are inside MyReLU.backward")
assert(by_op.masked_fill_.where:match("test_function.lua:13$"), by_op.masked_fill_.where)

-- The two-layer net of the lecture with MyReLU: the loss falls.
torch.manual_seed(0)
local N, D_in, H, D_out = 64, 100, 20, 10
local xs, ys = torch.randn(N, D_in), torch.randn(N, D_out)
local w1 = torch.randn(D_in, H, {requires_grad = true})
local w2 = torch.randn(H, D_out, {requires_grad = true})
local first, last
for t = 1, 50 do
  local y_pred = MyReLU.apply(xs:mm(w1)):mm(w2)
  local step_loss = (y_pred - ys):pow(2):sum()
  step_loss:backward()
  torch.no_grad(function()
    w1:sub_(w1.grad * 1e-5)
    w2:sub_(w2.grad * 1e-5)
    w1.grad:zero_()
    w2.grad:zero_()
  end)
  first = first or step_loss:item()
  last = step_loss:item()
end
assert(last < first * 0.9, string.format("loss fell from %g to %g", first, last))

-- Non-tensor arguments: passed through; their gradient is nil.
local Scale = torch.Function{
  name = "Scale",
  forward = function(ctx, t, s) ctx.s = s; return t * s end,
  backward = function(ctx, g) return g * ctx.s, nil end,
}
local a = torch.ones(2, {requires_grad = true})
Scale.apply(a, 5):sum():backward()
check.close(a.grad, {5, 5})

-- PyTorch's spelling torch.autograd.Function is the same function, and works the same.
check.equal(torch.autograd.Function, torch.Function, "torch.autograd.Function")
local Double = torch.autograd.Function{name = "Double", forward = function(ctx, t) return t * 2 end,
                                       backward = function(ctx, g) return g * 2 end}
local d = torch.ones(3, {requires_grad = true})
Double.apply(d):sum():backward()
check.close(d.grad, {2, 2, 2})

-- Bad definitions and results are errors naming the function and the line.
local ok, message = pcall(torch.Function, {forward = function() end})
assert(not ok and message:find("backward function", 1, true), message)
local WrongCount = torch.Function{name = "WrongCount", forward = function(ctx, p, q) return p * q end,
                                  backward = function(ctx, g) return g end}
local p = torch.ones(2, {requires_grad = true})
check.fails("backward", "WrongCount: backward returned 1 value for 2 arguments", function() WrongCount.apply(p, torch.ones(2)):sum():backward() end)
local WrongShape = torch.Function{name = "WrongShape", forward = function(ctx, q) return q:sum() end,
                                  backward = function(ctx, g) return g end}
check.fails("backward", "WrongShape: backward returned a gradient of shape [] for input 1, which has shape [2]", function() WrongShape.apply(p):backward() end)
local NotTensor = torch.Function{name = "NotTensor", forward = function(ctx, q) return 3 end,
                                 backward = function(ctx, g) return g end}
check.fails("NotTensor", "forward must return tensors; result 1 is a number", function() NotTensor.apply(p) end)
-- An engine error while recording the apply is said as that call (a view whose history a recorded
-- write made out of date, here).
do
  local Identity = torch.Function{name = "Identity", forward = function(ctx, q) return q * 1 end,
                                  backward = function(ctx, g) return g end}
  local y = torch.zeros(3, 2)
  local stale = y[1]
  y[2] = torch.ones(2, {requires_grad = true})
  check.fails("Identity.apply", "history is out of date", function() Identity.apply(stale) end)
end
local raises_line = debug.getinfo(1, "l").currentline + 1
local Raises = torch.Function{name = "Raises", forward = function(ctx, q) return q:mm(q) end,
                              backward = function(ctx, g) return g end}
ok, message = pcall(Raises.apply, p)
assert(not ok and message:find("^Raises.forward: mm: ") and message:find("test_function.lua:" .. raises_line .. ")", 1, true), message)

-- A tensor saved for backward and changed in place since is an error, as in PyTorch.
local Saves = torch.Function{name = "Saves", forward = function(ctx, q) ctx:save_for_backward(q); return q * 2 end,
                             backward = function(ctx, g) return g * 2 end}
local b = p * 1
local out = Saves.apply(b)
torch.no_grad(function() b:add_(1) end)
check.fails("backward", "Saves: backward needs saved tensor 1, which an in-place op changed", function() out:sum():backward() end)

print("test_function: ok")
