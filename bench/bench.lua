-- bench.lua: the benchmark workloads, timed single-threaded in µs per iteration.
--   tapedeck bench [W1 W2 ...]           (or: tapedeck bench/bench.lua [names])
-- Each workload is timed in samples of enough iterations to take ~20 ms; the table shows the
-- minimum (stable on shared machines) and the median of the samples. Shapes are the lecture's
-- (see ../shared/anchors.md for what PyTorch, DyNet and hand-written Eigen measure here).

local workloads = {}

local function leaf(t) return t:requires_grad_() end

-- W1: c = a * b on scalars, backward.
workloads[#workloads + 1] = {name = "W1", title = "scalar c=a*b + backward", target = 1.5, setup = function()
  local a = torch.tensor(15.0, {requires_grad = true})
  local b = torch.tensor(20.0, {requires_grad = true})
  return function()
    local c = a * b
    c:backward()
  end
end}

-- W2: the RNN cell, forward + backward, gradients cleared every iteration.
workloads[#workloads + 1] = {name = "W2", title = "rnn_cell fwd+bwd", target = 4, setup = function()
  local W_h, W_x = leaf(torch.randn(20, 20)), leaf(torch.randn(20, 10))
  local x, prev_h = torch.randn(1, 10), torch.randn(1, 20)
  return function()
    W_h.grad = nil
    W_x.grad = nil
    local next_h = (torch.mm(W_h, prev_h:t()) + torch.mm(W_x, x:t())):tanh()
    next_h:sum():backward()
  end
end}

-- W3: the same cell unrolled for 50 steps with h fed back; loss = sum of the last h.
workloads[#workloads + 1] = {name = "W3", title = "rnn unrolled 50 steps fwd+bwd", target = 150, setup = function()
  local W_h, W_x = leaf(torch.randn(20, 20)), leaf(torch.randn(20, 10))
  local xs = {}
  for t = 1, 50 do xs[t] = torch.randn(10, 1) end
  local h0 = torch.randn(20, 1)
  return function()
    W_h.grad = nil
    W_x.grad = nil
    local h = h0
    for t = 1, 50 do h = (W_h:mm(h) + W_x:mm(xs[t])):tanh() end
    h:sum():backward()
  end
end}

-- W4: one training step of the lecture's two-layer net (autograd + manual SGD under no_grad).
workloads[#workloads + 1] = {name = "W4", title = "two_layer_net train step", target = 300, setup = function()
  local x, y = torch.randn(64, 1000), torch.randn(64, 10)
  local w1, w2 = leaf(torch.randn(1000, 100)), leaf(torch.randn(100, 10))
  local lr = 1e-6
  local function update()
    w1:sub_(w1.grad, lr)
    w2:sub_(w2.grad, lr)
    w1.grad:zero_()
    w2.grad:zero_()
  end
  return function()
    local loss = (x:mm(w1):clamp{min = 0}:mm(w2) - y):pow(2):sum()
    loss:backward()
    torch.no_grad(update)
  end
end}

-- W5: a dense forward pass, relu(x·W1 + b1)·W2 + b2, MSE against y.
workloads[#workloads + 1] = {name = "W5", title = "dense forward + mse", target = 250, setup = function()
  local x, y = torch.randn(64, 1000), torch.randn(64, 1000)
  local W1, b1 = leaf(torch.randn(1000, 100) * 0.03), leaf(torch.zeros(100))
  local W2, b2 = leaf(torch.randn(100, 1000) * 0.1), leaf(torch.zeros(1000))
  return function()
    local pred = (x:mm(W1) + b1):relu():mm(W2) + b2
    local loss = (pred - y):pow(2):mean()
    return loss
  end
end}

-- W6: the lecture's small CNN, forward + backward: batch 8 of 1x28x28 -> conv2d(1->8, 3x3,
-- padding 1) + bias -> relu -> max_pool2d(2) -> flatten -> linear 1568->10 (mm with the transposed
-- weight, + bias, as nn.Linear) -> cross-entropy. Gradients cleared every iteration.
workloads[#workloads + 1] = {name = "W6", title = "small_cnn fwd+bwd", target = 450, setup = function()
  local x = torch.randn(8, 1, 28, 28)
  local labels = torch.tensor({3, 7, 1, 10, 5, 2, 8, 4}, {dtype = "int64"})
  local conv_w, conv_b = leaf(torch.randn(8, 1, 3, 3) * 0.3), leaf(torch.zeros(8))
  local fc_w, fc_b = leaf(torch.randn(10, 8 * 14 * 14) * 0.025), leaf(torch.zeros(10))
  local params = {conv_w, conv_b, fc_w, fc_b}
  return function()
    for _, p in ipairs(params) do p.grad = nil end
    local h = x:conv2d(conv_w, conv_b, {padding = 1}):relu():max_pool2d(2):flatten(2)
    local scores = torch.linear(h, fc_w, fc_b)
    local loss = torch.cross_entropy(scores, labels)
    loss:backward()
  end
end}

local function percentile_sorted(values, q)
  return values[math.max(1, math.floor(#values * q + 0.5))]
end

-- Time `step`: calibrate a sample to ~20 ms, then take `samples` samples (µs per iteration).
local function measure(step, samples)
  local clock = torch.perf_counter
  for _ = 1, 20 do step() end
  local iterations = 1
  while true do
    local t0 = clock()
    for _ = 1, iterations do step() end
    if clock() - t0 > 0.02 then break end
    iterations = iterations * 2
  end
  local per_iteration = {}
  for s = 1, samples do
    local t0 = clock()
    for _ = 1, iterations do step() end
    per_iteration[s] = (clock() - t0) / iterations * 1e6
  end
  table.sort(per_iteration)
  return per_iteration[1], percentile_sorted(per_iteration, 0.5), iterations
end

local wanted = {}
for _, name in ipairs({...}) do wanted[name:upper()] = true end
local samples = tonumber(os.getenv("TAPEDECK_BENCH_SAMPLES")) or 25

torch.manual_seed(0)
print(("%-4s %-32s %10s %10s %10s %8s"):format("", "workload", "min µs", "median µs", "target", "iters"))
for _, w in ipairs(workloads) do
  if next(wanted) == nil or wanted[w.name] then
    local step = w.setup()
    local min, median, iterations = measure(step, samples)
    local verdict = min <= w.target and "" or "  (over target)"
    print(("%-4s %-32s %10.2f %10.2f %10.1f %8d%s"):format(w.name, w.title, min, median, w.target, iterations, verdict))
    collectgarbage()
  end
end
