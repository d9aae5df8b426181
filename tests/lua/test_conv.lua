-- conv2d, max_pool2d and flatten from Lua: the lecture's homework, both argument styles, the
-- gradients they record, and bad input as errors naming the op, the shapes and this script's line.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")
torch.autograd.keep_backward_graph(true)   -- checks below read the backward nodes after backward()

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
check.fails("conv2d", "expects an input [N,C,H,W] or [C,H,W] and a 4-d weight [O,C/groups,kH,kW], got input [5,5]", function() return torch.ones(5, 5):conv2d(cross) end)
check.fails("conv2d", "got input [1,1,5,5], weight [3,3]", function() return x:conv2d(torch.ones(3, 3)) end)
check.fails("conv2d", "the bias must have shape [1] (one value per output channel), got [2] (input [1,1,5,5], weight [1,1,3,3])", function() return x:conv2d(cross, torch.ones(2)) end)
check.fails("conv2d", "stride must be at least 1, got 0 (input [1,1,5,5], weight [1,1,3,3])", function() return x:conv2d(cross, nil, {stride = 0}) end)
check.fails("conv2d", "padding must not be negative, got -1 (input [1,1,5,5], weight [1,1,3,3])", function() return x:conv2d(cross, nil, 1, -1) end)
check.fails("conv2d", "argument 3: bias must be a tensor or nil, got number", function() return x:conv2d(cross, 2) end)
check.fails("x:conv2d", "argument 4: unknown option 'pad' (did you mean 'padding'? it takes bias, stride, padding, dilation, groups)", function() return x:conv2d(cross, nil, {pad = 1}) end)
check.fails("conv2d", "argument 4: stride must be an integer, got number", function() return x:conv2d(cross, nil, 1.5) end)
check.fails("max_pool2d", "the kernel 6x6 is larger than the input 5x5 (input [1,1,5,5])", function() return x:max_pool2d(6) end)
check.fails("max_pool2d", "expects an input [N,C,H,W] or [C,H,W], got [5,5]", function() return torch.ones(5, 5):max_pool2d(2) end)
check.fails("max_pool2d", "stride must be at least 1, got 0", function() return x:max_pool2d(2, 0) end)
check.fails("max_pool2d", "argument 3: stride must be an integer or a list {h, w} of two, got table", function() return x:max_pool2d(2, {1, 2, 3}) end)
check.fails("max_pool2d", "argument 2: kernel_size is required (an integer or a list {h, w})", function() return x:max_pool2d() end)
check.fails("flatten", "start_dim 3 comes after end_dim 2 (shape [1,1,5,5])", function() return x:flatten(3, 2) end)
check.fails("flatten", "dim 5 out of range", function() return x:flatten(5) end)

-- The tape survives the errors.
check.close(torch.conv2d(x, cross, nil, 2), {1, -2, 3, 1}, 0, "after the errors")

-- ============================================================================================
-- PyTorch's full options (values and gradients against PyTorch: tests/oracle rows conv2d and
-- max_pool2d). Here: every way of writing them, the shapes, and the refusals.

local img = torch.randn(2, 4, 7, 6)
local w4 = torch.randn(6, 2, 3, 2)
-- positional in PyTorch's order, or by name, or mixed: the same call
local by_position = torch.conv2d(img, w4, nil, {2, 1}, {1, 0}, {1, 2}, 2)
check.shape(by_position, {2, 6, 4, 4}, "tuple stride, padding, dilation, groups")
check.close(img:conv2d(w4, {stride = {2, 1}, padding = {1, 0}, dilation = {1, 2}, groups = 2}), by_position, 0, "options")
check.close(F.conv2d(img, w4, nil, {2, 1}, {padding = {1, 0}, dilation = {1, 2}, groups = 2}), by_position, 0, "mixed")
check.close(F.conv2d(img, w4, {bias = torch.zeros(6), stride = {2, 1}, padding = {1, 0}, dilation = {1, 2}, groups = 2}),
            by_position, 0, "bias by name")
-- groups: each output channel sees only its group's inputs
local grouped = torch.conv2d(img, w4, nil, 1, 0, 1, 2)
check.close(grouped:narrow(2, 1, 3), torch.conv2d(img:narrow(2, 1, 2), w4:narrow(1, 1, 3)), 1e-5, "group 1")
check.close(grouped:narrow(2, 4, 3), torch.conv2d(img:narrow(2, 3, 2), w4:narrow(1, 4, 3)), 1e-5, "group 2")
-- one image [C,H,W] gives [O,Ho,Wo], the batched result's first sample
local one = torch.conv2d(img[1], w4, torch.ones(6), {groups = 2, padding = 1})
check.shape(one, {6, 7, 7}, "unbatched")
check.close(one, torch.conv2d(img, w4, torch.ones(6), {groups = 2, padding = 1})[1], 1e-6, "unbatched = batched[1]")
-- padding strings
check.shape(img:conv2d(torch.randn(3, 4, 3, 2), nil, {padding = "same"}), {2, 3, 7, 6}, "same keeps H and W")
check.shape(img:conv2d(torch.randn(3, 4, 2, 2), nil, 1, "same", {2, 3}), {2, 3, 7, 6}, "same with dilation, even kernel")
check.close(img:conv2d(w4, nil, 1, "valid", 1, 2), grouped, 0, "valid is no padding")
-- PyTorch's even-kernel "same": the extra row and column of padding at the bottom and right
local ramp = torch.arange(1, 10):reshape(1, 1, 3, 3):float()
check.close(ramp:conv2d(torch.ones(1, 1, 2, 2), nil, {padding = "same"}), {12, 16, 9, 24, 28, 15, 15, 17, 9}, 0, "same, 2x2")

-- max_pool2d: rectangular kernels, stride, padding (never the maximum), dilation, ceil_mode
local grid5 = torch.arange(25):float():reshape(1, 1, 5, 5)
check.close(grid5:max_pool2d({2, 3}), {7, 17}, 0, "rectangular kernel, stride = kernel")
check.close(grid5:max_pool2d(2, {ceil_mode = true}), {6, 8, 9, 16, 18, 19, 21, 23, 24}, 0, "ceil_mode")
check.close((-grid5):max_pool2d(3, 2, 1), {0, -1, -3, -5, -6, -8, -15, -16, -18}, 0, "padding is -inf, not 0")
check.close(grid5:max_pool2d(2, 1, 0, 3), {18, 19, 23, 24}, 0, "dilation 3")
check.close(F.max_pool2d(grid5, 3, {stride = 2, padding = 1, ceil_mode = true}), {6, 8, 9, 16, 18, 19, 21, 23, 24}, 0,
            "by name")
local values, indices = grid5:max_pool2d(2, {return_indices = true})
check.close(values, {6, 8, 16, 18}, 0, "return_indices: values")
check.equal(indices.dtype, "int64")
check.close(indices, {7, 9, 17, 19}, 0, "return_indices: 1-based indices in the H*W plane")
local v1, i1 = torch.max_pool2d(grid5[1], 2, 2, 0, 1, false, true)
check.shape(v1, {1, 2, 2}, "unbatched")
check.close(i1, indices[1], 0, "unbatched indices")
-- a window whose inside elements are all -inf points at its first element inside the input
local _, corner = torch.full({1, 2, 2}, -1 / 0):max_pool2d(2, 2, 1, {return_indices = true})
check.close(corner, {1, 2, 3, 4}, 0, "all -inf: indices inside the input")
-- gradients with padding and dilation: each to its window's maximum (oracle rows check PyTorch's)
local leaf = torch.arange(25):double():reshape(1, 5, 5):requires_grad_()
leaf:max_pool2d(3, {stride = 2, padding = 1}):sum():backward()
check.close(leaf.grad:sum(), 9, 0, "nine windows, nine gradients")
check.equal(leaf.grad[1][5][5]:item(), 1, "the corner window's maximum")

-- nn.Conv2d and nn.MaxPool2d take the same options
torch.manual_seed(3)
local conv = nn.Conv2d(4, 6, {3, 2}, {stride = {2, 1}, padding = "valid", dilation = {1, 2}, groups = 2, bias = false})
check.shape(conv.weight, {6, 2, 3, 2}, "weight [O, C/groups, kH, kW]")
check.equal(conv.bias, nil)
local bound = 1 / math.sqrt(2 * 3 * 2)   -- PyTorch's kaiming-uniform bound 1/sqrt(fan_in), fan_in = C/groups*kH*kW
check.equal(conv.weight:abs():max():item() <= bound, true, "init within the bound")
check.equal(conv.weight:abs():max():item() > 0.8 * bound, true, "init fills the bound")
check.shape(conv(img), {2, 6, 3, 4}, "Conv2d forward")
check.close(conv(img), img:conv2d(conv.weight, nil, {2, 1}, 0, {1, 2}, 2), 0, "Conv2d = F.conv2d")
check.equal(tostring(conv), "Conv2d(4, 6, kernel_size=(3, 2), stride=(2, 1), padding=valid, dilation=(1, 2), groups=2, bias=False)")
check.shape(nn.Conv2d(4, 2, 3, {padding = "same"})(img[1]), {2, 7, 6}, "Conv2d same, unbatched")
local pool = nn.MaxPool2d({3, 2}, {stride = 1, padding = {1, 0}, ceil_mode = true, return_indices = true})
local pv, pi = pool(grid5)
check.shape(pv, {1, 1, 5, 4}, "MaxPool2d options")
check.equal(pi.dtype, "int64")
check.equal(nn.MaxPool2d(2, 1).stride, 1)
check.equal(tostring(nn.MaxPool2d(2)), "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)")
check.fails("Conv2d", "in_channels must be divisible by groups", function() local _ = nn.Conv2d(3, 6, 3, {groups = 2}) end)
check.fails("Conv2d", "padding=\"same\" is not supported for strided convolutions", function() local _ = nn.Conv2d(3, 6, 3, {stride = 2, padding = "same"}) end)
check.fails("Conv2d", "kernel_size must be an integer >= 1 or a list {h, w} of two, got a table", function() local _ = nn.Conv2d(3, 6, {3}) end)
check.fails("Conv2d", "padding_mode \"reflect\" is not supported", function() local _ = nn.Conv2d(3, 6, 3, {padding_mode = "reflect"}) end)
check.fails("nn.MaxPool2d", "unknown option 'return_index' (did you mean 'return_indices'?", function() local _ = nn.MaxPool2d(2, {return_index = true}) end)
check.fails("MaxPool2d", "dilation must be an integer >= 1, got 0", function() local _ = nn.MaxPool2d(2, {dilation = 0}) end)

-- Refusals: each names the function, the shapes where there are some, and this line.
local x7 = torch.ones(1, 4, 7, 6)
check.fails("x:conv2d", "argument 4: unknown option 'dilations' (did you mean 'dilation'? it takes bias, stride, padding, dilation, groups)", function() return x7:conv2d(w4, nil, {dilations = 2}) end)
check.fails("conv2d", "stride is given twice (by position and by name)", function() return x7:conv2d(w4, nil, 2, {stride = 2}) end)
check.fails("conv2d", "argument 5: padding must be a size, {h, w}, \"valid\" or \"same\", got 'full'", function() return x7:conv2d(w4, nil, 1, "full") end)
check.fails("conv2d", "padding=\"same\" is not supported for strided convolutions (stride 2, 1)", function() return x7:conv2d(w4, nil, {2, 1}, "same") end)
check.fails("conv2d", "stride must be an integer or a list {h, w} of two, got table", function() return x7:conv2d(w4, nil, {1, 2, 3}) end)
check.fails("conv2d", "argument 6: dilation 1099511627776 is out of range", function() return x7:conv2d(w4, nil, 1, 0, {1, 1 << 40}) end)
check.fails("conv2d", "groups must be at least 1, got 0 (input [1,4,7,6], weight [6,2,3,2])", function() return x7:conv2d(w4, nil, {groups = 0}) end)
check.fails("conv2d", "groups must be an integer, got string", function() return x7:conv2d(w4, nil, {groups = "2"}) end)
check.fails("conv2d", "the input's channels (4) do not match the weight's (2) times groups (3)", function() return torch.ones(1, 4, 7, 6):conv2d(torch.ones(6, 2, 3, 3), nil, {groups = 3}) end)
check.fails("conv2d", "the weight's output channels (6) are not divisible by groups (4) (input [1,4,7,6], weight [6,1,3,2])", function() return x7:conv2d(torch.ones(6, 1, 3, 2), nil, {groups = 4}) end)
check.fails("conv2d", "padding must not be negative, got (0, -2) (input [1,4,7,6], weight [6,2,3,2])", function() return x7:conv2d(w4, nil, 1, {0, -2}, 1, 2) end)
check.fails("conv2d", "dilation must be at least 1, got 0", function() return x7:conv2d(w4, nil, {dilation = 0, groups = 2}) end)
check.fails("conv2d", "the kernel 3x2 (dilation 2147483647) is larger than the padded input 7x6 (input [1,4,7,6], weight [6,2,3,2], padding 0)", function() return x7:conv2d(w4, nil, {dilation = 2147483647, groups = 2}) end)
check.fails("conv2d", "the kernel 3x2 (dilation (4, 1)) is larger than the padded input 7x6", function() return x7:conv2d(w4, nil, {dilation = {4, 1}, groups = 2}) end)
check.fails("conv2d", "expects an input [N,C,H,W] or [C,H,W]", function() return torch.ones(1, 1, 4, 7, 6):conv2d(w4) end)
check.fails("max_pool2d", "padding must be at most half the kernel size, got padding 2 and kernel 3x3 (input [1,1,5,5])", function() return grid5:max_pool2d(3, 1, 2) end)
check.fails("max_pool2d", "padding must not be negative, got -1", function() return grid5:max_pool2d(3, 1, -1) end)
check.fails("max_pool2d", "dilation must be at least 1, got (1, 0)", function() return grid5:max_pool2d(2, {dilation = {1, 0}}) end)
check.fails("max_pool2d", "the kernel 2x2 (dilation 2147483647) is larger than the input 5x5 (input [1,1,5,5])", function() return grid5:max_pool2d(2, {dilation = 2147483647}) end)
check.fails("max_pool2d", "the kernel 4x4 is larger than the padded input 4x3 (input [1,2,1], padding 1)", function() return torch.ones(1, 2, 1):max_pool2d(4, 1, 1) end)
check.fails("max_pool2d", "a window lies wholly in the padding (kernel 2x2, dilation (1, 3), padding 1) (input [1,2,2])", function() return torch.ones(1, 2, 2):max_pool2d(2, 1, 1, {1, 3}) end)
check.fails("max_pool2d", "ceil_mode must be true or false, got number", function() return grid5:max_pool2d(2, {ceil_mode = 1}) end)
check.fails("x:max_pool2d", "unknown option 'padding_mode'", function() return grid5:max_pool2d(2, {padding_mode = "zeros"}) end)
check.fails("max_pool2d", "kernel must be at least 1, got (2, 0)", function() return grid5:max_pool2d({2, 0}) end)
check.fails("max_pool2d", "argument 2: kernel_size must be an integer, got number", function() return grid5:max_pool2d({2, 1.5}) end)
check.fails("max_pool2d", "takes at most 6 arguments after the tensor", function() return grid5:max_pool2d(2, 2, 0, 1, false, false, 3) end)

-- freeze: a plan with these options replays as eager does, forward and backward
local fw = torch.randn(6, 2, 3, 2, {requires_grad = true})
local function step(input)
  local h = input:conv2d(fw, nil, {stride = {2, 1}, padding = {1, 2}, dilation = {1, 2}, groups = 2}):relu()
  local out = h:max_pool2d({2, 3}, {stride = {1, 2}, padding = {1, 1}, ceil_mode = true})
  local loss = out:sum()
  loss:backward()
  return loss, out
end
local probe = torch.randn(2, 4, 7, 6)
local eager_loss, eager_out = step(probe)
local eager_grad = fw.grad:clone()
fw.grad = nil
local plan = torch.freeze(step, probe)
fw.grad = nil
local frozen_loss, frozen_out = plan(probe)
check.close(frozen_out, eager_out, 0, "frozen = eager")
check.close(frozen_loss, eager_loss, 0, "frozen loss = eager")
check.close(fw.grad, eager_grad, 1e-6, "frozen gradient = eager")
