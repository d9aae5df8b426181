-- make_corpus.lua: writes the plan-file seeds of the fuzz corpus (tests/fuzz/corpus/plan_load)
-- by freezing real functions on small tensors: an RNN cell step with backward, a two-layer net
-- training step (SGD with momentum), a conv net step (Adam), one with conv2d / max_pool2d's window
-- options, plans with guards, and a few more
-- that touch the other ops. Small tensors keep the files small (the fuzzer mutates every byte).
--   tapedeck tests/fuzz/make_corpus.lua tests/fuzz/corpus/plan_load
local dir = assert(arg and arg[1], "usage: tapedeck tests/fuzz/make_corpus.lua out_dir")
torch.manual_seed(0)

local written = 0
local function save(name, f)
  local path = dir .. "/" .. name .. ".tdp"
  torch.save_plan(f, path)
  torch.load_plan(path)   -- a seed must load
  written = written + 1
  print("wrote " .. path)
end

-- 1. One RNN cell step, with backward: mm, transpose, add, tanh, sum and their gradients.
do
  local W_h = torch.randn(4, 4, {requires_grad = true})
  local W_x = torch.randn(4, 3, {requires_grad = true})
  local function rnn_step(x, prev_h)
    local next_h = (torch.mm(W_h, prev_h:t()) + torch.mm(W_x, x:t())):tanh()
    local loss = next_h:sum()
    loss:backward()
    return loss, next_h
  end
  save("rnn_cell_step", torch.freeze(rnn_step, torch.randn(1, 3), torch.randn(1, 4)))
end

-- 2. A two-layer net training step: linear, relu, cross-entropy with int64 labels, backward,
-- SGD with momentum (in-place updates of the weights and of the optimizer's buffers).
do
  local model = nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 3))
  local optimizer = optim.SGD(model, {lr = 0.1, momentum = 0.9})
  local function train_step(x, labels)
    optimizer:zero_grad()
    local loss = F.cross_entropy(model(x), labels)
    loss:backward()
    optimizer:step()
    return loss
  end
  local x, labels = torch.randn(4, 5), torch.tensor({1, 3, 2, 1}, {dtype = "int64"})
  train_step(x, labels)   -- the momentum buffers exist from here on
  save("two_layer_net_step", torch.freeze(train_step, x, labels))
end

-- 3. A conv net step: conv2d (padding), relu, max_pool2d, flatten, linear, cross-entropy, Adam.
do
  local model = nn.Sequential(nn.Conv2d(1, 2, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(2 * 3 * 3, 3))
  local optimizer = optim.Adam(model, {lr = 1e-3})
  local function conv_step(images, labels)
    optimizer:zero_grad()
    local loss = F.cross_entropy(model(images), labels)
    loss:backward()
    optimizer:step()
    return loss
  end
  local images, labels = torch.randn(2, 1, 6, 6), torch.tensor({2, 3}, {dtype = "int64"})
  conv_step(images, labels)
  save("conv_net_step", torch.freeze(conv_step, images, labels))
end

-- 3b. PyTorch's window options (plan version 3): a grouped, dilated conv with tuple stride and
-- padding on one image, a "same" conv (its narrow), max_pool2d with padding, dilation, ceil_mode.
do
  local w = torch.randn(4, 1, 2, 3, {requires_grad = true})
  local function window_step(image)
    local h = F.conv2d(image, w, nil, {2, 1}, {1, 2}, {2, 1}, 2)
    local same = F.conv2d(h, torch.ones(4, 1, 2, 2), nil, {padding = "same", groups = 4})
    local pooled = F.max_pool2d(same, {3, 2}, {stride = {1, 2}, padding = 1, dilation = {1, 2}, ceil_mode = true})
    local loss = pooled:sum()
    loss:backward()
    return loss
  end
  save("conv_window_options", torch.freeze(window_step, torch.randn(2, 6, 5)))
end

-- 4. Guards: a comparison that decides a branch, a value read with item(), a .grad read.
do
  local w = torch.randn(3, {requires_grad = true})
  local function guarded(x)
    local y = (x * w):sum()
    local out
    if y > 0 then out = y * 2 else out = -y end
    local scale = x:max():item()
    out = out * scale
    out:backward()
    if w.grad then out = out + w.grad:sum() end
    return out
  end
  save("guards", torch.freeze(guarded, torch.ones(3)))
end

-- 4b. A .grad read before backward (a guard on its state) and a .grad cleared inside the plan.
do
  local w = torch.randn(2, {requires_grad = true})
  local first = (w * 2):sum()
  first:backward()   -- w.grad exists when the step is recorded
  local function grad_reads(x)
    local scaled = x * w.grad
    w.grad = nil
    local loss = (scaled * w):sum()
    loss:backward()
    return loss
  end
  save("grad_state", torch.freeze(grad_reads, torch.ones(2)))
end

-- 5. More ops: softmax, log_softmax, nll_loss, mse_loss, multi_margin_loss, cat, narrow, gather
-- (scatter_add in its backward), expand, reshape(-1) (a copy: view(-1) of that layout is refused,
-- as PyTorch refuses it), unsqueeze/squeeze, clamp, pow, exp, log, sigmoid, masked_fill, max along
-- a dim, mean, to, comparisons, bmm, and constants folded at load.
do
  local w = torch.randn(2, 3, {requires_grad = true})
  local function many(x, index)
    local a = x:softmax(2) + x:log_softmax(1):exp()
    local b = torch.cat({a, x:narrow(2, 1, 2)}, 2)
    local g = b:gather(2, index)
    local e = w:unsqueeze(1):expand(4, 2, 3):reshape(4, 6):reshape(-1):squeeze()
    local c = (x:clamp{min = -0.5, max = 0.5}:pow(2) + x:sigmoid()):sum()
    local m = x:masked_fill(x:gt(0), 0.25)
    local values, where = m:max(2)
    local bm = torch.bmm(x:view(1, 2, 3), w:t():view(1, 3, 2)):mean()
    local k = torch.arange(6):to("float32"):view(2, 3) + torch.ones(2, 3) * 2 + torch.eye(3):narrow(1, 1, 2)
    local loss = F.mse_loss(x, k) + F.nll_loss(x:log_softmax(2), torch.tensor({1, 3}, {dtype = "int64"}))
                 + F.multi_margin_loss(x, torch.tensor({2, 1}, {dtype = "int64"})) + g:sum() + e:sum() + c
                 + values:sum() + where:to("float32"):sum() + bm + (w * x):log_softmax(2):sum()
    loss:backward()
    return loss
  end
  save("many_ops", torch.freeze(many, torch.randn(2, 3), torch.tensor({{1, 3}, {2, 2}}, {dtype = "int64"})))
end

-- 6. Edge shapes: no inputs (everything folds at load), and empty and 0-d tensors.
do
  save("no_inputs", torch.freeze(function() return (torch.zeros(2, 3) + 1):sum() end))
  local function edges(x, s)
    return x:sum(1), (s * 2 + x:sum()):sqrt(), x:reshape(3, 0)
  end
  save("empty_and_0d", torch.freeze(edges, torch.zeros(0, 3), torch.tensor(4.0)))
end

print(("%d plan seeds"):format(written))
