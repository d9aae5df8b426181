-- conv2d, max_pool2d and flatten from Lua: the lecture's homework, both argument styles, the
-- gradients they record, and bad input as errors naming the op, the shapes and this script's line.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

local function op_names(t)
  local names = {}
  for _, node in ipairs(torch.graph(t)) do names[#names + 1] = node.op end
  return table.concat(names, " ")
end

-- The homework: 5x5 input, a 3x3 cross at stride 2 -> [[1,-2],[3,1]]; relu; max-pool 2 -> 3.
local x = torch.tensor({{{{1, 2, 3, 4, 5}, {2, 2, 1, 1, 1}, {3, 2, 1, 1, 1}, {4, 1, 1, 1, 1}, {5, 1, 1, 1, 1}}}})
local cross = torch.tensor({{{{0, -1, 0}, {1, 1, 1}, {0, -1, 0}}}})
local y = torch.conv2d(x, cross, nil, {stride = 2})
check.shape(y, {1, 1, 2, 2}, "homework conv")
check.close(y, {1, -2, 3, 1}, 0, "homework conv")
local r = y:relu()
check.close(r, {1, 0, 3, 1}, 0, "homework relu")
local pooled = r:max_pool2d(2)
check.shape(pooled, {1, 1, 1, 1}, "homework pool")
check.equal(pooled:item(), 3, "homework pool")

-- The same call every way it can be written.
check.close(torch.conv2d(x, cross, nil, 2), y, 0, "positional stride")
check.close(x:conv2d(cross, {stride = 2}), y, 0, "method, options without a bias")
check.close(x:conv2d(cross, nil, 2, 0), y, 0, "method, positional")
check.close(x:conv2d(cross, torch.tensor({10}), {stride = 2}), y + 10, 0, "bias, options")
check.close(torch.conv2d(x, cross, torch.tensor({10}), 2, 0), y + 10, 0, "bias, positional")
check.shape(x:conv2d(cross, nil, {padding = 1}), {1, 1, 5, 5}, "padding 1 keeps 5x5")
check.shape(x:conv2d(cross, nil, 1, 1), {1, 1, 5, 5}, "positional padding")
check.shape(torch.conv2d(x, torch.ones(2, 1, 2, 3)), {1, 2, 4, 3}, "rectangular kernel")
check.shape(torch.ones(1, 1, 6, 6):conv2d(torch.ones(1, 1, 3, 3), nil, 2), {1, 1, 2, 2}, "the 6th row fits no window")
check.equal(y.dtype, "float32")
check.equal(x:double():conv2d(cross:double()).dtype, "float64")

-- max_pool2d: stride defaults to the kernel; windows that do not fit are dropped.
local grid = torch.arange(16):float():reshape(1, 1, 4, 4)
check.close(grid:max_pool2d(2), {5, 7, 13, 15}, 0, "max_pool2d(2)")
check.close(torch.max_pool2d(grid, 3, 1), {10, 11, 14, 15}, 0, "kernel 3 stride 1")
check.close(grid:max_pool2d(3), {10}, 0, "kernel 3: one window fits")
check.shape(torch.ones(2, 3, 7, 5):max_pool2d(2), {2, 3, 3, 2}, "odd sizes")

-- flatten: 1-based dims; flatten(2) keeps the batch, as nn.Flatten() does.
local batch = torch.ones(8, 8, 14, 14)
check.shape(batch:flatten(), {12544}, "flatten()")
check.shape(batch:flatten(2), {8, 1568}, "flatten(2)")
check.shape(torch.flatten(batch, 2, 3), {8, 112, 14}, "flatten(2, 3)")
check.shape(batch:flatten(-2), {8, 8, 196}, "flatten(-2)")
check.shape(torch.tensor(3):flatten(), {1}, "a 0-d tensor")
check.equal(op_names(batch:flatten(2)), "ones reshape", "flatten is a reshape")

-- Gradients: the bias collects every output position; a 1x1 kernel's weight gets the sum of
-- its input channel; max_pool2d sends each gradient to the first maximum of its window.
local input = torch.randn(2, 3, 4, 4, {requires_grad = true})
local w = torch.randn(5, 3, 1, 1, {requires_grad = true})
local b = torch.zeros(5, {requires_grad = true})
local out = input:conv2d(w, b)
out:sum():backward()
check.close(b.grad, {32, 32, 32, 32, 32}, 1e-6, "bias grad = N*H*W")
local channel_sums = input:detach():sum(1):sum(2):sum(2)   -- [3]
for o = 1, 5 do check.close(w.grad[o]:reshape(3), channel_sums, 1e-5, "1x1 weight grad") end
check.close(input.grad[1][2], torch.ones(4, 4) * w:detach():sum(1)[2], 1e-5, "input grad")
local names = op_names(out:sum())
assert(names:find("conv2d_backward_input", 1, true), names)
assert(names:find("conv2d_backward_weight", 1, true), names)

local ties = torch.tensor({{{{1, 1, 0, 2}, {1, 0, 2, 2}}}}, {requires_grad = true})
ties:max_pool2d(2):sum():backward()
check.close(ties.grad, {{{{1, 0, 0, 1}, {0, 0, 0, 0}}}}, 0, "ties: the first maximum gets the gradient")
assert(op_names(ties:max_pool2d(2)):find("max_pool2d"), "max_pool2d node")

-- Bad input: each error names the op, the shapes and this line.
local w3 = torch.ones(8, 3, 3, 3)
check.fails("conv2d", "the input's channels (1) do not match the weight's (3) (input [1,1,5,5], weight [8,3,3,3])", function() return x:conv2d(w3) end)
check.fails("conv2d", "the kernel 7x7 is larger than the padded input 5x5 (input [1,1,5,5], weight [1,1,7,7], padding 0)", function() return x:conv2d(torch.ones(1, 1, 7, 7)) end)
check.fails("conv2d", "the kernel 8x8 is larger than the padded input 7x7 (input [1,1,5,5], weight [1,1,8,8], padding 1)", function() return x:conv2d(torch.ones(1, 1, 8, 8), nil, {padding = 1}) end)
check.fails("conv2d", "expects a 4-d input [N,C,H,W] and a 4-d weight [O,C,kH,kW], got input [5,5]", function() return torch.ones(5, 5):conv2d(cross) end)
check.fails("conv2d", "got input [1,1,5,5], weight [3,3]", function() return x:conv2d(torch.ones(3, 3)) end)
check.fails("conv2d", "the bias must have shape [1] (one value per output channel), got [2] (input [1,1,5,5], weight [1,1,3,3])", function() return x:conv2d(cross, torch.ones(2)) end)
check.fails("conv2d", "stride must be at least 1, got 0 (input [1,1,5,5], weight [1,1,3,3])", function() return x:conv2d(cross, nil, {stride = 0}) end)
check.fails("conv2d", "padding must not be negative, got -1 (input [1,1,5,5], weight [1,1,3,3])", function() return x:conv2d(cross, nil, 1, -1) end)
check.fails("conv2d", "argument 3: bias must be a tensor or nil, got number", function() return x:conv2d(cross, 2) end)
check.fails("conv2d", "argument 4: unknown option 'pad' (expected stride or padding)", function() return x:conv2d(cross, nil, {pad = 1}) end)
check.fails("conv2d", "argument 4: stride must be an integer, got number", function() return x:conv2d(cross, nil, 1.5) end)
check.fails("max_pool2d", "the kernel 6x6 is larger than the input 5x5 (input [1,1,5,5])", function() return x:max_pool2d(6) end)
check.fails("max_pool2d", "expects a 4-d input [N,C,H,W], got [5,5]", function() return torch.ones(5, 5):max_pool2d(2) end)
check.fails("max_pool2d", "stride must be at least 1, got 0", function() return x:max_pool2d(2, 0) end)
check.fails("max_pool2d", "argument 3: stride must be an integer, got table", function() return x:max_pool2d(2, {stride = 1}) end)
check.fails("max_pool2d", "argument 2: kernel must be an integer, got no value", function() return x:max_pool2d() end)
check.fails("flatten", "start_dim 3 comes after end_dim 2 (shape [1,1,5,5])", function() return x:flatten(3, 2) end)
check.fails("flatten", "dim 5 out of range", function() return x:flatten(5) end)

-- The tape survives the errors.
check.close(torch.conv2d(x, cross, nil, 2), {1, -2, 3, 1}, 0, "after the errors")
