-- F's losses and NN functions written in nn.lua: what the PyTorch oracle rows cannot
-- show (random dropout, running statistics updated in place, the op-row fast paths) and the
-- errors for bad arguments (each names the function and the argument, with this file's line).
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

local x = torch.tensor({{0.2, -1.5, 3.0}, {1.0, 0.5, -0.25}}, {dtype = "float64"})
local y = torch.tensor({{0.0, -1.0, 1.0}, {2.0, 0.5, 0.25}}, {dtype = "float64"})
local labels = torch.tensor({3, 1}, {dtype = "int64"})

-- l1_loss and smooth_l1_loss by hand: |d| = 0.2, 0.5, 2.0, 1.0, 0, 0.5
check.close(F.l1_loss(x, y), 4.2 / 6, 1e-12, "l1_loss")
check.close(F.l1_loss(x, y, {reduction = "sum"}), 4.2, 1e-12, "l1_loss sum")
-- beta 1: 0.5 d^2 below 1, d - 0.5 above: 0.02 + 0.125 + 1.5 + 0.5 + 0 + 0.125
check.close(F.smooth_l1_loss(x, y, {reduction = "sum"}), 2.27, 1e-12, "smooth_l1_loss")
check.shape(F.mse_loss(x, y, {reduction = "none"}), {2, 3})
check.close(F.mse_loss(x, y, "sum"), torch.mse_loss(x, y, "sum"), 1e-12, "F.mse_loss with a reduction string")

-- Without options the class losses are their op rows (one node); with options, compositions.
local function ops_of(t)
  local names = {}
  for _, node in ipairs(torch.graph(t)) do names[node.op] = true end
  return names
end
check.equal(ops_of(F.cross_entropy(x, labels)).cross_entropy, true, "cross_entropy without options: the op row")
check.equal(ops_of(F.cross_entropy(x, labels, {reduction = "none"})).log_softmax, true, "cross_entropy with options: log_softmax")
check.equal(ops_of(F.multi_margin_loss(x, labels)).multi_margin_loss, true, "multi_margin_loss without options: the op row")
check.close(F.cross_entropy(x, labels, {ignore_index = -7}), torch.cross_entropy(x, labels), 1e-12, "composition = op row")
check.close(F.cross_entropy(x, torch.tensor({3, 1})), torch.cross_entropy(x, labels), 1e-12, "float labels")
check.close(F.nll_loss(x, labels, {ignore_index = 1}), -x[1][3], 1e-12, "nll_loss ignores label 1")
check.close(F.multi_margin_loss(x, labels, {reduction = "none"}):sum(), torch.multi_margin_loss(x, labels, "sum"), 1e-12,
            "multi_margin_loss none")
-- binary_cross_entropy clamps its logs at -100, as PyTorch: a probability of 0 for a target of 1
check.close(F.binary_cross_entropy(torch.tensor({0.0, 1.0}), torch.tensor({1.0, 1.0})), 50, 1e-6, "bce of 0 and 1")
-- with logits, large logits stay finite
check.close(F.binary_cross_entropy_with_logits(torch.tensor({-1000.0, 1000.0}, {dtype = "float64"}),
                                               torch.tensor({1.0, 1.0}, {dtype = "float64"}), {reduction = "sum"}),
            1000, 1e-12, "bce with logits, large logits")

-- dropout: each element is 0 or x / (1 - p), reproducibly after manual_seed; eval is the input
local ones = torch.ones(1000, {dtype = "float64", requires_grad = true})
torch.manual_seed(7)
local d = F.dropout(ones, 0.25)
local kept = 0
for _, v in ipairs(d:totable()) do
  assert(v == 0 or math.abs(v - 1 / 0.75) < 1e-12, "dropout value " .. v)
  if v ~= 0 then kept = kept + 1 end
end
assert(kept > 650 and kept < 850, "dropout kept " .. kept .. " of 1000 with p = 0.25")
torch.manual_seed(7)
check.close(F.dropout(ones, {p = 0.25}), d, 0, "dropout after the same seed")
d:sum():backward()
check.close(ones.grad, d:detach(), 1e-12, "dropout's gradient is its mask / (1 - p)")
check.equal(F.dropout(ones, 0.5, false), ones, "dropout in eval: the input itself")
check.close(F.dropout(ones, 1):sum(), 0, 0, "dropout p = 1")

-- batch_norm: training updates the running stats in place (unbiased var), eval uses them
local input = torch.tensor({{1.0, 2.0}, {3.0, 6.0}}, {dtype = "float64"})
local running_mean, running_var = torch.zeros(2, {dtype = "float64"}), torch.ones(2, {dtype = "float64"})
local out = F.batch_norm(input, running_mean, running_var, {training = true, momentum = 0.5})
check.close(running_mean, {1.0, 2.0}, 1e-12, "running mean: 0.5 * 0 + 0.5 * {2, 4}")
check.close(running_var, {1.5, 4.5}, 1e-12, "running var: 0.5 * 1 + 0.5 * unbiased {2, 8}")
check.close(out, {{-1, -1}, {1, 1}}, 1e-5, "batch_norm output")
check.close(F.batch_norm(input, running_mean, running_var), (input - running_mean) / (running_var + 1e-5):sqrt(), 1e-12, "eval")

-- one_hot, embedding, pad
check.close(F.one_hot(labels), {{0, 0, 1}, {1, 0, 0}}, 0, "one_hot")
check.equal(F.one_hot(labels).dtype, "int64", "one_hot dtype")
check.shape(F.embedding(torch.tensor({{1, 2}}, {dtype = "int64"}), torch.ones(3, 5)), {1, 2, 5})
check.shape(F.pad(torch.ones(2, 3), {1, 1, 2, 0}), {4, 5})

-- errors: the function's name, the argument, this file's line
check.fails("F.l1_loss", "unknown option 'beta' (it takes reduction)", function() local _ = F.l1_loss(x, y, {beta = 1}) end)
check.fails("l1_loss", "argument 3: one argument too many", function() local _ = F.l1_loss(x, y, "sum") end)
check.fails("l1_loss", "reduction must be \"mean\", \"sum\" or \"none\", got \"avg\"", function() local _ = F.l1_loss(x, y, {reduction = "avg"}) end)
check.fails("l1_loss", "target must be a tensor, got 2", function() local _ = F.l1_loss(x, 2) end)
check.fails("smooth_l1_loss", "beta must be >= 0", function() local _ = F.smooth_l1_loss(x, y, {beta = -1}) end)
check.fails("binary_cross_entropy", "must have the input's shape", function() local _ = F.binary_cross_entropy(x, y[1]) end)
check.fails("binary_cross_entropy", "weight must be a tensor or nil", function() local _ = F.binary_cross_entropy(x, y, 2) end)
check.fails("F.binary_cross_entropy_with_logits", "unknown option 'pos'", function() local _ = F.binary_cross_entropy_with_logits(x, y, {pos = y}) end)
check.fails("F.cross_entropy", "unknown option 'smoothing'", function() local _ = F.cross_entropy(x, labels, {smoothing = 0.1}) end)
check.fails("cross_entropy", "weight is given twice", function() local _ = F.cross_entropy(x, labels, y[1], {weight = y[1]}) end)
check.fails("cross_entropy", "label_smoothing must be in [0, 1]", function() local _ = F.cross_entropy(x, labels, {label_smoothing = 2}) end)
check.fails("cross_entropy", "weight must be [C] = [3]", function() local _ = F.cross_entropy(x, labels, {weight = torch.ones(2)}) end)
check.fails("cross_entropy", "ignore_index is not supported with probability targets", function() local _ = F.cross_entropy(x, y, {ignore_index = 1}) end)
check.fails("nll_loss", "ignore_index must be a number", function() local _ = F.nll_loss(x, labels, {ignore_index = "1"}) end)
check.fails("multi_margin_loss", "p must be 1 or 2", function() local _ = F.multi_margin_loss(x, labels, 3) end)
check.fails("dropout", "p must be in [0, 1]", function() local _ = F.dropout(x, 1.5) end)
check.fails("dropout", "training must be true or false", function() local _ = F.dropout(x, 0.5, 1) end)
check.fails("F.dropout", "unknown option 'inplace'", function() local _ = F.dropout(x, {inplace = true}) end)
check.fails("layer_norm", "normalized_shape [2] is not the last dims", function() local _ = F.layer_norm(x, 2) end)
check.fails("layer_norm", "normalized_shape must be an integer or a list", function() local _ = F.layer_norm(x, "3") end)
check.fails("batch_norm", "running_mean and running_var are needed", function() local _ = F.batch_norm(x, nil, nil) end)
check.fails("batch_norm", "weight must be [C] = [3]", function() local _ = F.batch_norm(x, nil, nil, torch.ones(2), {training = true}) end)
check.fails("batch_norm", "expected more than 1 value per channel", function() local _ = F.batch_norm(x[{{1}}], nil, nil, {training = true}) end)
check.fails("embedding", "input must be int64", function() local _ = F.embedding(x, y) end)
check.fails("F.embedding", "unknown option 'padding_idx' (F.embedding takes no options)", function() local _ = F.embedding(labels, y, {padding_idx = 1}) end)
check.fails("one_hot", "label 3 is larger than num_classes = 2", function() local _ = F.one_hot(labels, 2) end)
check.fails("one_hot", "labels must be >= 1", function() local _ = F.one_hot(labels - 1) end)
check.fails("normalize", "dim must be an integer", function() local _ = F.normalize(x, 2, 1.5) end)
check.fails("pad", "mode must be", function() local _ = F.pad(x, {1, 1}, "mirror") end)
check.fails("pad", "two sizes per dim", function() local _ = F.pad(x, {1, 1, 1}) end)
local message = check.fails("pad", "not possible in mode constant", function() local _ = F.pad(x, {-4, 0}) end)
assert(not message:find("pad: pad:", 1, true), "named once: " .. message)
check.fails("cross_entropy", "gather: index 5 out of range", function() local _ = F.cross_entropy(x, torch.tensor({5, 1}), {reduction = "none"}) end)
check.fails("pad", "too large for mode reflect", function() local _ = F.pad(x, {3, 0}, "reflect") end)
check.fails("avg_pool2d", "ceil_mode = true is not supported", function() local _ = F.avg_pool2d(torch.ones(1, 4, 4), 2, {ceil_mode = true}) end)
check.fails("avg_pool2d", "kernel_size must be an integer >= 1 or a list of two", function() local _ = F.avg_pool2d(torch.ones(1, 4, 4), {2, 2, 2}) end)
check.fails("avg_pool2d", "padding must be at most half the kernel size", function() local _ = F.avg_pool2d(torch.ones(1, 4, 4), 2, 1, 2) end)
check.fails("F.avg_pool2d", "unknown option 'dilation'", function() local _ = F.avg_pool2d(torch.ones(1, 4, 4), 2, {dilation = 2}) end)
check.close(F.avg_pool2d(torch.arange(16):reshape(1, 4, 4):double(), 2), {{{2.5, 4.5}, {10.5, 12.5}}}, 1e-12, "avg_pool2d")

-- the loss modules take reduction "none" too
check.shape(nn.CrossEntropyLoss{reduction = "none"}(x, labels), {2})
check.shape(nn.MSELoss{reduction = "none"}(x, y), {2, 3})
print("test_nn_functional: ok")
