-- Looking at tensors: shape, size, dim, numel, item, totable, grad, requires_grad, grad_fn, node,
-- is_leaf, dtype, tostring.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

local m = torch.tensor({{1, 2, 3}, {4, 5, 6}})

-- t.shape is a table of sizes (prints as [2,3]); t:size() is the same, t:size(d) one size
local shape = m.shape
check.equal(#shape, 2)
check.equal(shape[1], 2)
check.equal(shape[2], 3)
check.equal(tostring(shape), "[2,3]")
check.equal(tostring(m:size()), "[2,3]")
check.equal(m:size(1), 2)
check.equal(m:size(2), 3)
check.equal(m:size(-1), 3)
check.equal(math.type(m:size(1)), "integer")
check.equal(tostring(torch.tensor(1).shape), "[]")

-- dim, numel, item (exactly one element), totable (nested like the shape)
check.equal(m:dim(), 2)
check.equal(m:numel(), 6)
check.equal(torch.tensor(2.5):item(), 2.5)
check.equal(torch.tensor({{7}}):item(), 7.0)
local tt = m:totable()
check.equal(#tt, 2)
check.equal(#tt[1], 3)
check.equal(tt[2][3], 6.0)
check.equal(type(torch.tensor(4):totable()), "number")

-- dtype
check.equal(m.dtype, "float32")
check.equal(m:double().dtype, "float64")
check.equal(torch.arange(2).dtype, "int64")

-- a plain tensor: a leaf, no grad, no grad_fn; node is its integer id on the tape
check.equal(m.requires_grad, false)
check.equal(m.is_leaf, true)
check.equal(m.grad, nil)
check.equal(m.grad_fn, nil)
check.equal(math.type(m.node), "integer")
assert(torch.ones(1).node > m.node, "ids grow in record order")

-- a result computed from a tensor that requires grad: not a leaf, has a grad_fn record
local w = torch.tensor({1, 2}, {requires_grad = true})
local y = (w * 3):sum(); local y_line = debug.getinfo(1, "l").currentline
check.equal(w.is_leaf, true)
check.equal(y.is_leaf, false)
check.equal(y.requires_grad, true)
local fn = y.grad_fn
check.equal(fn.op, "sum")
check.equal(fn.id, y.node)
check.equal(fn.phase, "forward")
assert(fn.where:match("test_inspection%.lua:" .. y_line .. "$"), fn.where)
check.equal(fn.line, y_line)
check.equal(#fn.inputs, 1)
check.equal(tostring(fn.shape), "[]")
check.equal(fn.dtype, "float32")
check.equal(type(tostring(fn)), "string")
assert(tostring(fn):find("sum", 1, true), tostring(fn))

-- results made with grad mode off do not require grad
local z = torch.no_grad(function() return w * 2 end)
check.equal(z.requires_grad, false)
check.equal(z.grad_fn, nil)

-- requires_grad can be set on leaves (float only), not on computed tensors
local leaf = torch.ones(2)
leaf.requires_grad = true
check.equal(leaf.requires_grad, true)
leaf:requires_grad_(false)
check.equal(leaf.requires_grad, false)
check.fails("requires_grad", "only leaves", function() y.requires_grad = false end)
check.fails("requires_grad", "only float tensors", function() torch.arange(2).requires_grad = true end)

-- t.grad after backward; it can be cleared with t.grad = nil
y:backward()
check.close(w.grad, {3, 3})
w.grad = nil
check.equal(w.grad, nil)

-- tostring: values, then size (not for 0-d), dtype (not for float32), requires_grad / grad_fn
check.equal(tostring(m), "tensor([[1., 2., 3.],\n        [4., 5., 6.]], size=[2,3])")
check.equal(tostring(torch.tensor(1.5)), "tensor(1.5000)")
assert(tostring(y):find("grad_fn=<sum #" .. y.node .. ">", 1, true), tostring(y))
check.equal(tostring(torch.tensor({1}, {dtype = "float64"})), "tensor([1.], size=[1], dtype=float64)")
assert(tostring(w):find("requires_grad=true", 1, true), tostring(w))
local big = tostring(torch.zeros(10000))
assert(#big < 1000, "a big tensor prints abbreviated")
assert(big:find("...", 1, true), big)

-- torch.is_tensor
check.equal(torch.is_tensor(m), true)
check.equal(torch.is_tensor({}), false)
check.equal(torch.is_tensor(1), false)

print("test_inspection: ok")
