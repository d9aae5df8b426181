-- bench.lua: the benchmark workloads, timed single-threaded in µs per call, eager and frozen, beside
-- PyTorch and, with --peers, TensorFlow.
--   tapedeck bench [--device cuda] [W1 W2 ...]        (or: tapedeck bench/bench.lua [names])
--   tapedeck bench --peers [--out DIR] [W1 W2 ...]    (./run.sh bench-peers installs the peers first)
-- Each workload's setup returns a step function and a list of its arguments. The same step runs
-- eagerly and frozen (torch.freeze). A sample is enough calls to take ~20 ms (or the workload's
-- `calls`); a table cell is the minimum over the samples (stable on shared machines) and their
-- median.
--
-- What is interleaved with what: for each workload, every column is set up (warm-up, calibration;
-- a peer's trace or compile happens there), then round s takes sample s of each column in turn --
-- tapedeck eager, tapedeck frozen, then each peer column. The peers are Python processes
-- (bench_torch.py and bench_tf.py run with --serve: peers.lua, peer_serve.py) that time one sample
-- when asked, so all the columns of a round are measured within a few hundred ms of each other and
-- a change in the machine's load reaches them alike. The workloads run one after the other.
--
-- Plain `tapedeck bench` (W1-W10): tapedeck's columns, the targets, a frozen step's peak memory
-- and its max |difference| from the eager step (outputs, gradients, updated parameters: from
-- f:timeit(1)), and, when python3 imports torch, PyTorch eager and TorchScript columns (on the GPU:
-- torch.compile). `--peers` (W1-W8 and W10 unless named): seven columns -- tapedeck eager
-- and frozen, PyTorch eager, TorchScript, torch.compile, TensorFlow eager, tf.function -- the
-- versions, the machine and the peer targets met or missed, printed and written as markdown and
-- a PNG bar chart (bench/results/peers.md and peers.png, or DIR: peers_report.lua). A framework
-- that is not installed is skipped, saying so. See docs/performance.md ("Peers and this machine") for the peers.
--
-- Targets are on the minimum, eager / frozen; a "!" after them marks a minimum over its target.
-- Adding a workload = one entry below, and one function in bench_torch.py and bench_tf.py for the
-- peer columns (a workload without a twin there gets "-").
-- `needs` lists torch functions it uses that may not exist yet; without them it is skipped.
-- Optional fields: `per_step = T` shows times per unrolled step (µs/step) instead of per call;
-- `samples` and `warmup` replace the run's sample count and the 20 warm-up calls (a workload whose
-- one call takes a second); `calls` fixes the calls per sample; `cold_calls = n` makes a sample
-- "make the static function anew, then call it n times" (W10a); `eager_vs_torch = r` makes the
-- eager target r x PyTorch eager's minimum in this run (no eager target without PyTorch).

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
-- model and step are char_lstm_model.lua's. Targets: 0.5x / 0.3x of PyTorch eager's
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
-- cross-entropy, backward, AdamW (nanoGPT's decay groups). Targets: 0.7x / 0.5x of
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

-- W9 (the long loop): the lecture's cell unrolled T steps as a long loop is written -- h a [1,20] row
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

-- W10: the lecture's tf.function slide. N, D, H = 64, 1000, 100; its Dense(H, relu) then
-- Dense(D) is nn.Sequential(nn.Linear(D, H), nn.ReLU(), nn.Linear(H, D)); the forward pass and the
-- MSE loss, timed as the slide's timeit(number=10) times it: a sample is 10 calls, shown per call.
-- W10a is the slide's own measurement: each sample makes the static function anew (here
-- torch.freeze, which records one run; in the peers a new tf.function, torch.jit.trace or
-- torch.compile) and times that with its first 10 calls. W10b: the same 10 calls once warm. The
-- slide (Google Colab, April 2020): dynamic 25.2 ms, static 39.3 ms for the 10 calls.
local function slide_model()
  local model = nn.Sequential(nn.Linear(1000, 100), nn.ReLU(), nn.Linear(100, 1000))
  local x, y = torch.randn(64, 1000), torch.randn(64, 1000)
  return function(x, y) return F.mse_loss(model(x), y) end, {x, y}
end
workloads[#workloads + 1] = {name = "W10a", title = "lecture slide, first 10 calls", cold_calls = 10, setup = slide_model}
workloads[#workloads + 1] = {name = "W10b", title = "lecture slide, 10 calls warm", calls = 10, setup = slide_model}

local function percentile_sorted(values, q)
  return values[math.max(1, math.floor(#values * q + 0.5))]
end

-- ============================================================================================
-- Timing: columns and their samples

-- With --device cuda every tensor is made on the GPU (torch.set_default_device) and each timed
-- batch of iterations ends with torch.cuda.synchronize(), so the times include the GPU's work.
local device = "cpu"
local function finish_queued_work()
  if device ~= "cpu" then torch.cuda.synchronize() end
end

-- How many calls of `step` take ~20 ms.
local function calibrate(step)
  local clock = torch.perf_counter
  local iterations = 1
  while true do
    local t0 = clock()
    for _ = 1, iterations do step() end
    finish_queued_work()
    if clock() - t0 > 0.02 then return iterations end
    iterations = iterations * 2
  end
end

-- A column is {sample = function() -> µs per call, or nil and why}, or {failed = why}.

-- A step of this process in steady state: `warmup` calls (20 unless given) run now, then a sample
-- is `calls` calls, or as many as take ~20 ms.
local function local_column(step, warmup, calls)
  for _ = 1, warmup or 20 do step() end
  local n = calls or calibrate(step)
  return {sample = function()
    local clock = torch.perf_counter
    finish_queued_work()
    local t0 = clock()
    for _ = 1, n do step() end
    finish_queued_work()
    return (clock() - t0) / n * 1e6
  end}
end

-- The slide's timeit of a static function: a sample makes a new function with make() and times it
-- with its first `calls` calls. One sample runs now and is dropped (what the process pays once), as
-- peer_serve.py's ColdStep does for the peers.
local function cold_column(make, calls)
  local function sample()
    local clock = torch.perf_counter
    finish_queued_work()
    local t0 = clock()
    local fresh = make()
    for _ = 1, calls do fresh() end
    finish_queued_work()
    return (clock() - t0) / calls * 1e6
  end
  sample()
  return {sample = sample}
end

-- Samples interleaved: round s takes one sample of each column in turn. Returns, per column,
-- {min, median} in µs per call, or {failed = why} (a column whose sample fails drops out).
local function measure(columns, samples)
  local times = {}
  for i = 1, #columns do times[i] = {} end
  for _ = 1, samples do
    for i, column in ipairs(columns) do
      if not column.failed then
        local us, why = column.sample()
        if us then times[i][#times[i] + 1] = us else column.failed = why end
      end
    end
  end
  local results = {}
  for i, column in ipairs(columns) do
    if column.failed then
      results[i] = {failed = column.failed}
    else
      table.sort(times[i])
      results[i] = {times[i][1], percentile_sorted(times[i], 0.5)}
    end
  end
  return results
end

-- ============================================================================================
-- The peers: Python processes that time the same workloads (peers.lua)

local bench_peers = dofile(bench_dir .. "peers.lua")

-- Every peer column, in the tables' order. Plain `tapedeck bench` shows PyTorch eager and
-- TorchScript (torch.compile on the GPU); --peers shows all.
local PEER_COLUMNS = {
  {peer = "torch", mode = "eager", label = "PyTorch eager"},
  {peer = "torch", mode = "script", label = "TorchScript"},
  {peer = "torch", mode = "compile", label = "torch.compile"},
  {peer = "tf", mode = "eager", label = "TF eager"},
  {peer = "tf", mode = "function", label = "tf.function"},
}
local PEER_PROCESSES = {
  torch = {label = "PyTorch", module = "torch", script = bench_dir .. "bench_torch.py"},
  tf = {label = "TensorFlow", module = "tensorflow", script = bench_dir .. "bench_tf.py"},
}

-- Start the peer processes the columns need. Returns the columns whose peer started, the peers
-- by name and the notes on those that did not start ("TensorFlow is not installed ...").
local function start_peers(columns)
  local running, notes, available = {}, {}, {}
  for _, column in ipairs(columns) do
    local name = column.peer
    if running[name] == nil then
      local spec = PEER_PROCESSES[name]
      local peer, why = bench_peers.start{label = spec.label, module = spec.module, script = spec.script, device = device}
      running[name] = peer or false
      if not peer then notes[#notes + 1] = why .. "; its columns are skipped" end
    end
    if running[name] then available[#available + 1] = column end
  end
  return available, running, notes
end

-- A peer column of workload `name`, set up (per peer, all its modes at once: `setups` keeps them).
local function peer_column(column, running, setups, name, columns)
  local peer = running[column.peer]
  if not setups[column.peer] then
    local modes = {}
    for _, c in ipairs(columns) do if c.peer == column.peer then modes[#modes + 1] = c.mode end end
    setups[column.peer] = peer:setup(name, modes)
  end
  local setup = setups[column.peer][column.mode]
  if setup.failed then return {failed = setup.failed} end
  return {sample = function() return peer:sample(name, column.mode) end}
end

-- ============================================================================================
-- One workload

-- Time workload w: tapedeck eager and frozen, then `peer_columns`, samples interleaved. Returns
-- {eager = cell, frozen = cell, peers = {label = cell}, frozen_fn = the frozen step or nil} where
-- a cell is {min, median} in µs per call (per step with per_step) or {failed = why}.
local function run_workload(w, peer_columns, running, samples)
  local step, args = w.setup()
  args = args or {}
  local n = #args
  local function eager_step() return step(table.unpack(args, 1, n)) end
  local function freeze(native)
    return torch.freeze{name = w.name, strict = true, native = native, step, table.unpack(args, 1, n)}
  end
  local frozen_ok, frozen = pcall(freeze)
  -- Native code (docs/freeze.md): the same plan compiled to C++; a plan that cannot be says why.
  local native_ok, native = pcall(freeze, true)
  if native_ok and n == 0 then native_ok, native = pcall(function() native() return native end) end   -- records now
  if native_ok and not native:stats().native then native_ok, native = false, "no native code (the reason is on stderr)" end
  local function replay(f) return function() return f(table.unpack(args, 1, n)) end end

  local columns
  if w.cold_calls then
    columns = {cold_column(function() return eager_step end, w.cold_calls),
               frozen_ok and cold_column(function() return replay(freeze()) end, w.cold_calls) or {failed = frozen},
               native_ok and cold_column(function() return replay(freeze(true)) end, w.cold_calls) or {failed = native}}
  else
    columns = {local_column(eager_step, w.warmup, w.calls),
               frozen_ok and local_column(replay(frozen), w.warmup, w.calls) or {failed = frozen},
               native_ok and local_column(replay(native), w.warmup, w.calls) or {failed = native}}
  end
  local name, setups = w.name:upper(), {}   -- the peers' names are upper case (W9A for W9a)
  for _, column in ipairs(peer_columns) do
    columns[#columns + 1] = peer_column(column, running, setups, name, peer_columns)
  end

  local t = measure(columns, w.samples or samples)
  for peer_name in pairs(setups) do running[peer_name]:done(name) end
  local per = w.per_step or 1
  local function per_step(cell) return cell.failed and cell or {cell[1] / per, cell[2] / per} end
  local result = {eager = per_step(t[1]), frozen = per_step(t[2]), native = per_step(t[3]), peers = {},
                  frozen_fn = frozen_ok and frozen or nil, native_fn = native_ok and native or nil}
  for i, column in ipairs(peer_columns) do result.peers[column.label] = per_step(t[3 + i]) end
  return result
end

-- ============================================================================================
-- Plain `tapedeck bench`: today's table

local function plain_header(peer_columns)
  local header = ("%-4s %-30s %18s %18s %8s %15s %14s %10s %18s %7s %9s %7s %10s"):format("", "workload",
    "eager min/median", "frozen min/median", "speedup", "targets e/f", "peak KiB e/f", "max|diff|", "native min/median",
    "nat/frz", "limit", "nat/lim", "nat|diff|")
  for _, column in ipairs(peer_columns) do header = header .. ("  %18s"):format(column.label) end
  return header
end

local function plain_cell(cell)
  if not cell or cell.failed then return ("%18s"):format("-") end
  return ("%8.2f /%8.2f"):format(cell[1], cell[2])
end

-- The machine's arithmetic limit: FLOP/s of one core on independent FMAs, measured once.
local fma_peak

-- The native columns of a row: native min/median, native against frozen, the limit (the plan's
-- FLOPs at the FMA peak, µs per call or step) and native against it, native's max |diff| from eager.
local function native_columns(w, r)
  local per = w.per_step or 1
  local limit = r.frozen_fn:stats().flops / fma_peak * 1e6 / per
  local native = r.native
  if not native or native.failed then
    return (" %18s %7s %9.3g %7s %10s"):format("-", "-", limit, "-", "-")
  end
  local diff = r.native_fn:timeit(1).native_max_diff
  return (" %8.2f /%8.2f %6.2fx %9.3g %6.1fx %10.2g"):format(native[1], native[2], native[1] / r.frozen[1], limit,
    native[1] / limit, diff or 0)
end

-- One row of the plain table (and, for W9, the line on what its freeze cost).
local function print_plain_row(w, r, peer_columns)
  local peer_cells = ""
  for _, column in ipairs(peer_columns) do peer_cells = peer_cells .. "  " .. plain_cell(r.peers[column.label]) end
  if r.frozen.failed then   -- the eager column alone (plans do not run on the GPU yet: docs/cuda.md)
    print(("%-4s %-30s %8.2f /%8.2f   frozen: %s"):format(w.name, w.title, r.eager[1], r.eager[2],
      tostring(r.frozen.failed):sub(1, 60)) .. peer_cells)
    return
  end
  local report = r.frozen_fn:timeit(1)
  local native_cells = native_columns(w, r)
  local eager, fr = r.eager, r.frozen
  local eager_target = w.eager_target
  local torch_eager = r.peers["PyTorch eager"]
  if w.eager_vs_torch then eager_target = torch_eager and not torch_eager.failed and w.eager_vs_torch * torch_eager[1] end
  local over = (eager_target and eager[1] > eager_target) or (w.frozen_target and fr[1] > w.frozen_target)
  local function target(x) return x and ("%.1f"):format(x) or "-" end
  print(("%-4s %-30s %8.2f /%8.2f %8.2f /%8.2f %7.2fx %7s/%-5s%s %6.1f/%6.1f %10.2g"):format(w.name, w.title,
    eager[1], eager[2], fr[1], fr[2], eager[1] / fr[1], target(eager_target), target(w.frozen_target),
    over and "!" or " ", report.eager_peak_bytes / 1024, report.frozen_peak_bytes / 1024, report.max_diff) ..
    native_cells .. peer_cells)
  if w.per_step then
    local s = r.frozen_fn:stats()
    print(("    freeze: recorded run %.3f s, compile %.3f s = %.2f µs per recorded node (%d nodes, %d plan steps)"):format(
      s.record_seconds, s.compile_seconds, s.compile_seconds / s.recorded_nodes * 1e6, s.recorded_nodes, s.steps))
  end
end

-- PyTorch's note under the plain table: its version, python and BLAS.
local function torch_note(peer)
  local versions = table.concat(peer.versions, "\n")
  local blas = versions:match("blas (%S+)") or "unknown"
  if not blas:find("openblas", 1, true) and not blas:find("mkl", 1, true) then
    blas = blas .. " -- the reference BLAS: PyTorch's matmuls are ~25x slower than with OpenBLAS " ..
           "(apt-get install libopenblas0-pthread for a fair comparison)"
  end
  return ("PyTorch %s (%s, Python %s), one thread, BLAS: %s"):format(versions:match("torch (%S+)") or "", peer.python,
    peer.python_version, blas)
end

-- ============================================================================================
-- Main

local wanted, peers_mode, out_dir = {}, false, bench_dir .. "results"
local args = {...}
local i = 1
while i <= #args do
  if args[i] == "--device" then
    device = args[i + 1] or error("bench: --device needs cpu or cuda")
    i = i + 2
  elseif args[i] == "--out" then
    out_dir = args[i + 1] or error("bench: --out needs a directory")
    i = i + 2
  elseif args[i] == "--peers" then
    peers_mode = true
    i = i + 1
  else
    wanted[args[i]:upper()] = true
    i = i + 1
  end
end
if peers_mode and device ~= "cpu" then error("bench: --peers compares on the CPU only (TensorFlow's peer runs there)") end
if device ~= "cpu" then
  torch.set_default_device(device)   -- an error giving the reason when there is no GPU
  print(("device: %s (%s)"):format(device, torch.cuda.get_device_name()))
end
local samples = tonumber(os.getenv("TAPEDECK_BENCH_SAMPLES")) or 25

-- --peers runs W1-W8 and W10 unless told; W9 selects W9a, W9b and W9c, W10 selects W10a and W10b.
local PEERS_DEFAULT = {W1 = true, W2 = true, W3 = true, W4 = true, W5 = true, W6 = true, W7 = true, W8 = true, W10 = true}
local selected = {}
for _, w in ipairs(workloads) do
  local name, family = w.name:upper(), w.name:upper():match("^W%d+")
  local chosen = wanted[name] or wanted[family]
  if next(wanted) == nil then chosen = not peers_mode or PEERS_DEFAULT[family] end
  if chosen then selected[#selected + 1] = w end
end

local wanted_columns = {}
for _, column in ipairs(PEER_COLUMNS) do
  local plain = column.peer == "torch" and (column.mode == "eager" or column.mode == (device == "cpu" and "script" or "compile"))
  if peers_mode or plain then wanted_columns[#wanted_columns + 1] = column end
end
local peer_columns, running, notes = start_peers(wanted_columns)

local report
if peers_mode then
  report = dofile(bench_dir .. "peers_report.lua")
  report.begin(running, notes, samples)
else
  fma_peak = torch.fma_peak()
  print(("FMA peak of one core: %.1f GFLOP/s (torch.fma_peak); limit = the plan's FLOPs at that peak, µs per call"):format(
    fma_peak / 1e9))
  print(plain_header(peer_columns))
end
local results = {}
torch.manual_seed(0)
for _, w in ipairs(selected) do
  local missing
  for _, fn in ipairs(w.needs or {}) do if not torch[fn] then missing = fn end end
  if missing then
    print(("%-4s %-30s skipped: torch.%s is not in this build"):format(w.name, w.title, missing))
  else
    local r = run_workload(w, peer_columns, running, samples)
    if peers_mode then
      results[#results + 1] = {workload = w, eager = r.eager, frozen = r.frozen, peers = r.peers}
      report.row(results[#results], PEER_COLUMNS)
    else
      print_plain_row(w, r, peer_columns)
    end
  end
  collectgarbage()
end
for _, peer in pairs(running) do if peer then peer:close() end end
if peers_mode then
  report.finish(results, PEER_COLUMNS, out_dir)
else
  if running.torch then print(torch_note(running.torch)) end
  for _, note in ipairs(notes) do print(note) end
end
