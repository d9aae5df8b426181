-- bench.lua: the benchmark workloads, timed single-threaded in µs per iteration, eager and frozen.
--   tapedeck bench [W1 W2 ...]           (or: tapedeck bench/bench.lua [names])
-- Each workload's setup returns a step function and a list of its arguments. The same step runs eagerly and frozen
-- (torch.freeze), their samples interleaved (the machines are noisy: compare within one run); each
-- sample is enough iterations to take ~20 ms; the table shows the minimum (stable on shared
-- machines) and the median. A frozen step's peak memory and its max |difference| from the eager
-- step (outputs, gradients, updated parameters) come from f:timeit(1). When PyTorch is installed
-- (Debian's python3-torch), bench_torch.py runs the same workloads in PyTorch eager and
-- TorchScript in this run, and their columns are added. See ../shared/anchors.md for the peers.
--
-- Targets are on the minimum, eager / frozen; a "!" after them marks a minimum over its target.
-- Adding a workload = one entry below (and one in bench_torch.py for the PyTorch columns).
-- `needs` lists torch functions it uses that may not exist yet; without them it is skipped.
-- Optional fields: `per_step = T` shows times per unrolled step (µs/step) instead of per call;
-- `samples` and `warmup` replace the run's sample count and the 20 warm-up calls (a workload whose
-- one call takes a second); `eager_vs_torch = r` makes the eager target r x PyTorch eager's
-- minimum in this run (no eager target without PyTorch).

local workloads = {}

local function leaf(t) return t:requires_grad_() end

-- W1: c = a * b on scalars, backward.
workloads[#workloads + 1] = {name = "W1", title = "scalar c=a*b + backward", eager_target = 1.5, frozen_target = nil, setup = function()
  local a = torch.tensor(15.0, {requires_grad = true})
  local b = torch.tensor(20.0, {requires_grad = true})
  return function()
    a.grad = nil
    b.grad = nil
    local c = a * b
    c:backward()
  end
end}

-- W2: the RNN cell, forward + backward, gradients cleared every iteration.
workloads[#workloads + 1] = {name = "W2", title = "rnn_cell fwd+bwd", eager_target = 4, frozen_target = 1.5, setup = function()
  local W_h, W_x = leaf(torch.randn(20, 20)), leaf(torch.randn(20, 10))
  local x, prev_h = torch.randn(1, 10), torch.randn(1, 20)
  return function(x, prev_h)
    W_h.grad = nil
    W_x.grad = nil
    local next_h = (torch.mm(W_h, prev_h:t()) + torch.mm(W_x, x:t())):tanh()
    next_h:sum():backward()
  end, {x, prev_h}
end}

-- W3: the same cell unrolled for 50 steps with h fed back; loss = sum of the last h.
workloads[#workloads + 1] = {name = "W3", title = "rnn unrolled 50 steps fwd+bwd", eager_target = 150, frozen_target = 45, setup = function()
  local W_h, W_x = leaf(torch.randn(20, 20)), leaf(torch.randn(20, 10))
  local xs = {}
  for t = 1, 50 do xs[t] = torch.randn(10, 1) end
  local h0 = torch.randn(20, 1)
  return function(h0)
    W_h.grad = nil
    W_x.grad = nil
    local h = h0
    for t = 1, 50 do h = (W_h:mm(h) + W_x:mm(xs[t])):tanh() end
    h:sum():backward()
  end, {h0}
end}

-- W4: one training step of the lecture's two-layer net (autograd + manual SGD under no_grad).
workloads[#workloads + 1] = {name = "W4", title = "two_layer_net train step", eager_target = 300, frozen_target = 260, setup = function()
  local x, y = torch.randn(64, 1000), torch.randn(64, 10)
  local w1, w2 = leaf(torch.randn(1000, 100)), leaf(torch.randn(100, 10))
  local lr = 1e-6
  local function update()
    w1:sub_(w1.grad, lr)
    w2:sub_(w2.grad, lr)
    w1.grad:zero_()
    w2.grad:zero_()
  end
  -- the gradients exist from the first step on (zeroed, not dropped), as in a training loop
  torch.no_grad(function() w1.grad = torch.zeros(1000, 100); w2.grad = torch.zeros(100, 10) end)
  return function(x, y)
    local loss = (x:mm(w1):clamp{min = 0}:mm(w2) - y):pow(2):sum()
    loss:backward()
    torch.no_grad(update)
  end, {x, y}
end}

-- W5: a dense forward pass, relu(x·W1 + b1)·W2 + b2, MSE against y.
workloads[#workloads + 1] = {name = "W5", title = "dense forward + mse", eager_target = 250, frozen_target = 220, setup = function()
  local x, y = torch.randn(64, 1000), torch.randn(64, 1000)
  local W1, b1 = leaf(torch.randn(1000, 100) * 0.03), leaf(torch.zeros(100))
  local W2, b2 = leaf(torch.randn(100, 1000) * 0.1), leaf(torch.zeros(1000))
  return function(x, y)
    local pred = (x:mm(W1) + b1):relu():mm(W2) + b2
    return (pred - y):pow(2):mean()
  end, {x, y}
end}

-- W6: the lecture's small CNN, forward + backward: batch 8 of 1x28x28 -> conv2d(1->8, 3x3,
-- padding 1) + bias -> relu -> max_pool2d(2) -> flatten -> linear 1568->10 -> cross-entropy.
workloads[#workloads + 1] = {name = "W6", title = "small_cnn fwd+bwd", eager_target = 450, frozen_target = 400,
  needs = {"conv2d", "max_pool2d", "cross_entropy"}, setup = function()
  local x = torch.randn(8, 1, 28, 28)
  local labels = torch.tensor({1, 2, 3, 4, 5, 6, 7, 8}, {dtype = "int64"})
  local conv_w, conv_b = leaf(torch.randn(8, 1, 3, 3) * 0.3), leaf(torch.zeros(8))
  local fc_w, fc_b = leaf(torch.randn(10, 1568) * 0.02), leaf(torch.zeros(10))
  return function(x, labels)
    for _, p in ipairs({conv_w, conv_b, fc_w, fc_b}) do p.grad = nil end
    local h = torch.conv2d(x, conv_w, conv_b, {padding = 1}):relu()
    h = torch.max_pool2d(h, 2):reshape(8, 1568)
    local loss = torch.cross_entropy(torch.linear(h, fc_w, fc_b), labels)
    loss:backward()
  end, {x, labels}
end}

-- W7 and W8 load the model scripts, found from this file's directory.
local bench_dir = debug.getinfo(1, "S").source:match("^@(.*[/\\])") or ""

-- W7: one training step of scripts/models/char_lstm.lua at its default sizes: vocabulary 71 (the
-- script's text has 71 distinct characters), embedding 32, one LSTM layer of 128, a batch of 16
-- sequences of 32 characters; cross_entropy, backward, clip_grad_norm_(1.0), Adam (lr 0.01). The
-- model and step are char_lstm_model.lua's. Targets: issue 13's 0.5x / 0.3x of PyTorch eager's
-- 7.1 ms (one thread, OpenBLAS, the shared 2-core machine).
workloads[#workloads + 1] = {name = "W7", title = "char_lstm train step", eager_target = 3550, frozen_target = 2130,
  setup = function()
  local M = dofile(bench_dir .. "../scripts/models/char_lstm_model.lua")
  local model = M.CharLSTM(71, {embed_dim = 32, hidden_size = 128, num_layers = 1})
  local optimizer = optim.Adam(model:parameters(), {lr = 0.01})
  local x, y = torch.randint(1, 72, {16, 32}), torch.randint(1, 72, {16, 32})
  return M.make_train_step(model, optimizer, 1.0), {x, y}
end}

-- W8: one training step of scripts/models/tiny_gpt.lua's model at its sizes: batch 16 x 32 tokens,
-- vocabulary 65, 2 blocks, 4 heads, n_embd 32 (nanoGPT's model.py in Lua); zero_grad, forward,
-- cross-entropy, backward, AdamW (nanoGPT's decay groups). Targets: issue 13's 0.7x / 0.5x of
-- PyTorch 1.13 eager's minimum here (4180 µs on the 2-core dev machine, one thread).
workloads[#workloads + 1] = {name = "W8", title = "tiny_gpt train step", eager_target = 2900, frozen_target = 2100,
  setup = function()
  local gpt = dofile(bench_dir .. "../scripts/models/tiny_gpt_model.lua")
  local config = gpt.config{vocab_size = 65, block_size = 32, n_layer = 2, n_head = 4, n_embd = 32}
  local model = gpt.GPT(config)
  local optimizer = model:configure_optimizers(0.1, 1e-4, {0.9, 0.99})
  local x = torch.randint(1, 66, {16, 32})
  local y = torch.randint(1, 66, {16, 32})
  return gpt.train_step(model, optimizer), {x, y}
end}

-- W9 (issue 15): the lecture's cell unrolled T steps as a long loop is written -- h a [1,20] row
-- fed back, x_t a narrow of xs -- and backward from the last h's sum, at T = 50, 5,000 and
-- 50,000, shown per unrolled step so the rows compare. Target: eager <= 0.25x PyTorch eager at
-- every T. The large T take few samples of one call each (W9c: 2 samples, ~1 s a call eager and
-- ~3 s in PyTorch): W9 adds ~40 s to the bench, a minute on a loaded machine. Each W9 row is
-- followed by what its freeze cost: the recorded run, the compile (passes and buffers) and the
-- compile's µs per recorded node.
local function rnn_unroll(T)
  return function()
    local W_h, W_x = leaf(torch.randn(20, 20) * 0.1), leaf(torch.randn(20, 10))
    local xs = torch.randn(T, 10)
    return function(xs)
      W_h.grad = nil
      W_x.grad = nil
      local h = torch.zeros(1, 20)
      for t = 1, T do h = (torch.mm(W_h, h:t()) + torch.mm(W_x, xs:narrow(1, t, 1):t())):tanh():t() end
      h:sum():backward()
    end, {xs}
  end
end
for _, w in ipairs({{"W9a", 50, nil, nil}, {"W9b", 5000, 5, 1}, {"W9c", 50000, 2, 0}}) do
  local name, T, samples, warmup = w[1], w[2], w[3], w[4]
  workloads[#workloads + 1] = {name = name, title = ("rnn unroll T=%d, per step"):format(T), per_step = T,
    samples = samples, warmup = warmup, eager_vs_torch = 0.25, setup = rnn_unroll(T)}
end

local function percentile_sorted(values, q)
  return values[math.max(1, math.floor(#values * q + 0.5))]
end

-- With --device cuda every tensor is made on the GPU (torch.set_default_device) and each timed
-- batch of iterations ends with torch.cuda.synchronize(), so the times include the GPU's work.
local device = "cpu"
local function finish_queued_work()
  if device ~= "cpu" then torch.cuda.synchronize() end
end

-- How many calls of `step` take ~20 ms, after `warmup` calls.
local function calibrate(step, warmup)
  local clock = torch.perf_counter
  for _ = 1, warmup do step() end
  local iterations = 1
  while true do
    local t0 = clock()
    for _ = 1, iterations do step() end
    finish_queued_work()
    if clock() - t0 > 0.02 then return iterations end
    iterations = iterations * 2
  end
end

-- Time the steps, samples interleaved; returns per step {min, median} in µs per iteration.
local function measure(steps, samples, warmup)
  local clock = torch.perf_counter
  local iterations, times = {}, {}
  for i, step in ipairs(steps) do
    iterations[i] = calibrate(step, warmup or 20)
    times[i] = {}
  end
  for s = 1, samples do
    for i, step in ipairs(steps) do
      local n = iterations[i]
      finish_queued_work()
      local t0 = clock()
      for _ = 1, n do step() end
      finish_queued_work()
      times[i][s] = (clock() - t0) / n * 1e6
    end
  end
  local results = {}
  for i = 1, #steps do
    table.sort(times[i])
    results[i] = {times[i][1], percentile_sorted(times[i], 0.5)}
  end
  return results
end

-- PyTorch's columns: bench_torch.py prints "W1 eager <min> <median>" and "W1 script <min> <median>",
-- after its version and the BLAS it uses. Returns the times by workload and a note (or nil, why not).
local function pytorch_times(names, samples)
  local here = (arg and arg[0] or ""):match("^(.*[/\\])") or (debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./")
  local script = here .. "bench_torch.py"
  -- The python3 on PATH (a virtualenv with pip's torch), else Debian's (python3-torch): a PATH
  -- python3 from pyenv or a venv does not see Debian's dist-packages.
  local python
  for _, candidate in ipairs({"python3", "/usr/bin/python3"}) do
    local probe = io.popen(candidate .. " -c 'import torch' 2>&1 && echo TORCH_OK")
    local found = probe and probe:read("a") or ""
    if probe then probe:close() end
    if found:find("TORCH_OK", 1, true) then python = candidate break end
  end
  if not python then return nil, "PyTorch is not installed (Debian: python3-torch); its columns are skipped" end
  -- Debian's OpenBLAS 0.3.21 takes an AVX-512 CPU for a "Prescott" and runs ~5x slower unless told
  -- the core type (../shared/anchors.md); on a CPU without AVX-512 that core type would crash.
  local cpuinfo = io.open("/proc/cpuinfo")
  local avx512 = cpuinfo and cpuinfo:read("a"):find("avx512f", 1, true)
  if cpuinfo then cpuinfo:close() end
  local coretype = avx512 and "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX} " or ""
  local pipe = io.popen(("OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 %s%s '%s' --device %s %d %s 2>&1"):format(
    coretype, python, script, device, samples, table.concat(names, " ")))
  local out = pipe:read("a")
  pipe:close()
  local blas = out:match("blas (%S+)") or "unknown"
  if not blas:find("openblas", 1, true) and not blas:find("mkl", 1, true) then
    blas = blas .. " -- the reference BLAS: PyTorch's matmuls are ~25x slower than with OpenBLAS " ..
           "(apt-get install libopenblas0-pthread for a fair comparison)"
  end
  local note = "PyTorch " .. (out:match("torch (%S+)") or "") .. " (" .. python .. "), one thread, BLAS: " .. blas
  local times = {}
  for name, mode, min, median in out:gmatch("(W%d+%a?) (%a+) ([%d%.]+) ([%d%.]+)") do
    name = name:upper()   -- bench_torch.py's names are upper case (W9A for W9a)
    times[name] = times[name] or {}
    times[name][mode] = {tonumber(min), tonumber(median)}
  end
  if next(times) == nil then return nil, "PyTorch run failed: " .. out:sub(1, 200) end
  return times, note
end

local wanted = {}
local args = {...}
local i = 1
while i <= #args do
  if args[i] == "--device" then
    device = args[i + 1] or error("bench: --device needs cpu or cuda")
    i = i + 2
  else
    wanted[args[i]:upper()] = true
    i = i + 1
  end
end
if device ~= "cpu" then
  torch.set_default_device(device)   -- an error giving the reason when there is no GPU
  print(("device: %s (%s)"):format(device, torch.cuda.get_device_name()))
end
local samples = tonumber(os.getenv("TAPEDECK_BENCH_SAMPLES")) or 25

local selected = {}
for _, w in ipairs(workloads) do
  local name = w.name:upper()   -- W9 selects W9a, W9b and W9c
  if next(wanted) == nil or wanted[name] or wanted[name:match("^W%d+")] then selected[#selected + 1] = w end
end

local torch_names = {}
for _, w in ipairs(selected) do torch_names[#torch_names + 1] = w.name end
local torch_times, torch_note = pytorch_times(torch_names, samples)

torch.manual_seed(0)
local header = ("%-3s %-30s %18s %18s %8s %15s %14s %10s"):format("", "workload", "eager min/median", "frozen min/median",
  "speedup", "targets e/f", "peak KiB e/f", "max|diff|")
if torch_times then header = header .. ("  %18s %18s"):format("torch eager", device == "cpu" and "torchscript" or "torch.compile") end
print(header)
for _, w in ipairs(selected) do
  local missing
  for _, fn in ipairs(w.needs or {}) do if not torch[fn] then missing = fn end end
  if missing then
    print(("%-3s %-30s skipped: torch.%s is not in this build"):format(w.name, w.title, missing))
  else
    local step, args = w.setup()
    args = args or {}
    local n = #args
    local eager_step = function() step(table.unpack(args, 1, n)) end
    local frozen, why_not = nil, nil
    local ok, made = pcall(torch.freeze, {name = w.name, strict = true, step, table.unpack(args, 1, n)})
    if ok then frozen = made else why_not = made end
    local frozen_step = frozen and function() frozen(table.unpack(args, 1, n)) end
    local t = measure({eager_step, frozen_step}, w.samples or samples, w.warmup)
    if not frozen then   -- the eager column alone (plans do not run on the GPU yet: docs/cuda.md)
      local e = {t[1][1] / (w.per_step or 1), t[1][2] / (w.per_step or 1)}
      local pt = torch_times and torch_times[w.name:upper()]
      local function cell(m) return m and ("%8.2f /%8.2f"):format(m[1] / (w.per_step or 1), m[2] / (w.per_step or 1)) or ("%18s"):format("-") end
      print(("%-3s %-30s %8.2f /%8.2f   frozen: %s"):format(w.name, w.title, e[1], e[2], tostring(why_not):sub(1, 60)) ..
            (pt and ("  " .. cell(pt.eager) .. " " .. cell(pt.script or pt.compile)) or ""))
      goto continue
    end
    local report = frozen:timeit(1)
    local per = w.per_step or 1
    local function per_step(m) return m and {m[1] / per, m[2] / per} end
    local eager, fr = per_step(t[1]), per_step(t[2])
    local pt = torch_times and torch_times[w.name:upper()]
    local eager_target = w.eager_target
    if w.eager_vs_torch then eager_target = pt and pt.eager and w.eager_vs_torch * pt.eager[1] / per end
    local over = (eager_target and eager[1] > eager_target) or (w.frozen_target and fr[1] > w.frozen_target)
    local function target(x) return x and ("%.1f"):format(x) or "-" end
    local line = ("%-3s %-30s %8.2f /%8.2f %8.2f /%8.2f %7.2fx %7s/%-5s%s %6.1f/%6.1f %10.2g"):format(w.name, w.title,
      eager[1], eager[2], fr[1], fr[2], eager[1] / fr[1], target(eager_target), target(w.frozen_target),
      over and "!" or " ", report.eager_peak_bytes / 1024, report.frozen_peak_bytes / 1024, report.max_diff)
    if pt then
      local function cell(m) return m and ("%8.2f /%8.2f"):format(m[1] / per, m[2] / per) or ("%18s"):format("-") end
      line = line .. "  " .. cell(pt.eager) .. " " .. cell(pt.script or pt.compile)
    end
    print(line)
    if w.per_step and frozen then
      local s = frozen:stats()
      print(("    freeze: recorded run %.3f s, compile %.3f s = %.2f µs per recorded node (%d nodes, %d plan steps)"):format(
        s.record_seconds, s.compile_seconds, s.compile_seconds / s.recorded_nodes * 1e6, s.recorded_nodes, s.steps))
    end
  end
  ::continue::
  collectgarbage()
end
if torch_note then print(torch_note) end
