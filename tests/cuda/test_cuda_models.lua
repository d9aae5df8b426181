-- The four model scripts' training steps on the GPU against the CPU: spiral_mlp (MLP), shapes_cnn
-- (a CNN with batch norm), char_lstm (embedding + LSTM, gradient clipping) and tiny_gpt (a small
-- GPT, AdamW), each built three times from one seed, two copies moved with model:to(device), the
-- same batch on both devices, four training steps: eager on the CPU, eager on the GPU, and frozen on
-- the GPU (torch.freeze records step 1; step 2 replays the plan step by step, step 3 captures its
-- runs of steps as CUDA graphs and launches them, step 4 launches them again). The losses, every gradient and
-- every parameter and buffer after each step must agree (float64 1e-9, float32 1e-4, relative to
-- each tensor's largest value).
--
-- Without a usable GPU it prints why and exits 77 (CTest: skipped). With TAPEDECK_EMULATE_GPU=1
-- it runs on the emulated GPU (engine/backends/device_emulated.h), as CI does; TAPEDECK_TEST_DEVICE=cpu
-- runs it CPU against CPU.
local here = arg[0]:match("^(.*[/\\])") or "./"
local models_dir = here .. "../../scripts/models/"
local spiral = dofile(models_dir .. "spiral_mlp_model.lua")
local shapes = dofile(models_dir .. "shapes_cnn_model.lua")
local lstm = dofile(models_dir .. "char_lstm_model.lua")
local gpt = dofile(models_dir .. "tiny_gpt_model.lua")

local device = os.getenv("TAPEDECK_TEST_DEVICE") or "cuda"
if device == "cuda" and not torch.cuda.is_available() then
  -- On the GPU machine (scripts/gpu_run.sh) a missing GPU is the failure, not a skip.
  if os.getenv("TAPEDECK_REQUIRE_GPU") == "1" then
    print("FAILED: TAPEDECK_REQUIRE_GPU=1 and no usable GPU: " .. torch.cuda.why_unavailable())
    os.exit(1)
  end
  print("skipped: " .. torch.cuda.why_unavailable())
  os.exit(77)
end
print("device: " .. (device == "cuda" and torch.cuda.get_device_name() or device))
local TOLERANCE = {float32 = 1e-4, float64 = 1e-9}

-- Each model: build() -> model, optimizer-maker, batch(...) -> the step's arguments, and the step.
local MODELS = {
  {name = "spiral_mlp",
   build = function() return spiral.model(16, 3) end,
   optimizer = function(model) return optim.Adam(model, {lr = 1e-2}) end,
   batch = function() return spiral.dataset(20, 3) end,
   step = spiral.train_step},
  {name = "shapes_cnn",
   build = function() return shapes.model{channels = {4, 8}, size = 8, dropout = 0} end,
   optimizer = function(model) return optim.Adam(model, {lr = 3e-3}) end,
   batch = function() return shapes.dataset(12, 8) end,
   step = shapes.train_step},
  {name = "char_lstm",
   build = function() return lstm.CharLSTM(13, {embed_dim = 8, hidden_size = 16, num_layers = 1}) end,
   optimizer = function(model) return optim.Adam(model, {lr = 1e-2}) end,
   batch = function()
     local x = torch.randint(1, 14, {4, 6})
     return x, torch.randint(1, 14, {4, 6})
   end,
   step = function(model, optimizer) return lstm.make_train_step(model, optimizer, 1.0) end},
  {name = "tiny_gpt",
   build = function() return gpt.GPT(gpt.config{block_size = 8, vocab_size = 11, n_layer = 2, n_head = 2, n_embd = 8}) end,
   optimizer = function(model) return model:configure_optimizers(0.1, 1e-3, {0.9, 0.95}) end,
   batch = function()
     local x = torch.randint(1, 12, {3, 8})
     return x, torch.randint(1, 12, {3, 8})
   end,
   step = gpt.train_step},
}

-- The largest relative difference agree() has seen since the last reset (the figure the GPU run
-- reports per model and dtype).
local worst_seen = 0

-- a and b (tensors, any devices) agree within tol relative to b's largest magnitude.
local function agree(a, b, tol, what)
  a, b = a:cpu():double(), b:cpu():double()
  assert(table.concat(a:size(), ",") == table.concat(b:size(), ","), what .. ": shapes differ")
  local largest = b:abs():max():item()
  local worst = (a - b):abs():max():item()
  worst_seen = math.max(worst_seen, worst / math.max(largest, 1e-30))
  if not (worst <= tol * math.max(largest, 1e-30)) then
    error(string.format("%s: differs by %.3g (largest %.3g, tolerance %.1g relative)", what, worst, largest, tol), 2)
  end
end

for _, spec in ipairs(MODELS) do
  for _, dtype in ipairs({"float64", "float32"}) do
    worst_seen = 0
    local function make()
      torch.manual_seed(7)
      local model = spec.build()
      if dtype == "float64" then model:double() end
      return model
    end
    local on_cpu, on_device, on_frozen = make(), make():to(device), make():to(device)
    torch.manual_seed(11)
    local x, y = spec.batch()
    if dtype == "float64" and x.dtype == "float32" then x = x:double() end
    local x_device, y_device = x:to(device), y:to(device)
    local step_cpu = spec.step(on_cpu, spec.optimizer(on_cpu))
    local step_device = spec.step(on_device, spec.optimizer(on_device))
    local step_to_freeze = spec.step(on_frozen, spec.optimizer(on_frozen))
    local frozen, recorded_loss
    local tol = TOLERANCE[dtype]
    -- The losses, gradients and state of `model` (on the device) against the CPU model's.
    local function compare(model, loss, loss_cpu, what)
      assert(loss.device == device, what .. ": the loss is on " .. loss.device)
      agree(loss, loss_cpu, tol, what .. ": loss")
      local params = {}
      for _, pair in ipairs(model:named_parameters()) do params[pair[1]] = pair[2] end
      for _, pair in ipairs(on_cpu:named_parameters()) do
        local key, p = pair[1], pair[2]
        local q = params[key]
        assert(q.device == device, what .. ": " .. key .. " is on " .. q.device)
        if p.grad then agree(q.grad, p.grad, tol, what .. ": grad of " .. key) end
      end
      local state = {}
      for key, v in pairs(model:state_dict()) do state[key] = v end
      for key, v in pairs(on_cpu:state_dict()) do agree(state[key], v, tol, what .. ": " .. key .. " after the step") end
    end
    for i = 1, 4 do
      local what = string.format("%s %s step %d on %s", spec.name, dtype, i, device)
      local loss_cpu = step_cpu(x, y)
      compare(on_device, step_device(x_device, y_device), loss_cpu, what)
      local loss_frozen
      if i == 1 then   -- recording runs the step once
        frozen = torch.freeze{function(a, b) recorded_loss = step_to_freeze(a, b); return recorded_loss end,
                              x_device, y_device, strict = true}
        loss_frozen = recorded_loss
      else
        loss_frozen = frozen(x_device, y_device)
      end
      compare(on_frozen, loss_frozen, loss_cpu, what .. " (frozen)")
    end
    local stats = frozen:stats()
    if device ~= "cpu" then
      assert(stats.device == device, spec.name .. ": the plan runs on " .. tostring(stats.device))
      assert(stats.graph_segments > 0 and stats.graphs_captured == stats.graph_segments,
             string.format("%s %s: %d of %d runs of steps captured as CUDA graphs", spec.name, dtype,
                           stats.graphs_captured, stats.graph_segments))
    end
    print(string.format("%s %s: largest difference from the cpu %.3g (relative), %d of %d runs of steps captured",
                        spec.name, dtype, worst_seen, stats.graphs_captured or 0, stats.graph_segments or 0))
  end
  print(spec.name .. ": the training steps on " .. device .. ", eager and frozen, agree with the cpu's")
end
print("ok")
