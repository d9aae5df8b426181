-- Tensors that outlive a few garbage collections are freed too. Lua's collector runs in
-- generational mode (lua_tensor.cpp, tell_collector): a tensor alive across collections turns
-- old, and only a full collection frees an old one. Lua starts a full collection when its own heap
-- doubles, which the small userdata holding tensors hardly move; tapedeck starts one when the live
-- tensor storage doubles. Without that, each loop below would keep every 4 MB tensor it made.
--   tapedeck tests/memory/old_tensors_flat.lua
local MB = 1024 * 1024
local STEPS = 400   -- 400 x 4 MB = 1.6 GB made by each loop

local function peak_mb_of(loop)
  collectgarbage()
  torch.reset_peak_memory()
  loop()
  local _, _, peak = torch.memory()
  collectgarbage()
  return peak / MB
end

-- The recurrent pattern: h is carried from one step to the next, so it lives through collections.
local function carried_state()
  local w = torch.randn(1024, 1024) * 0.001
  local h = torch.randn(1024, 1024)
  for _ = 1, STEPS do
    h = (h + w):tanh()
  end
end

-- A parameter replaced (not updated in place) each step, with autograd on: the graph of each step
-- holds the old parameter until the next step drops it.
local function replaced_parameter()
  local w = torch.randn(1024, 1024):requires_grad_()
  for _ = 1, STEPS do
    local loss = (w * 2):sum()
    loss:backward()
    w = (w - w.grad * 0.01):detach():requires_grad_()
  end
end

-- Views make nodes and no storage: those are collected too (live nodes stay few).
local function views_only()
  local x = torch.randn(64, 64)
  local _, nodes_before = torch.memory()
  local most = 0
  for i = 1, 200000 do
    local v = x:t():narrow(1, 1, 8)
    if i % 1000 == 0 then most = math.max(most, select(2, torch.memory()) - nodes_before) end
  end
  return most
end

local carried = peak_mb_of(carried_state)
local replaced = peak_mb_of(replaced_parameter)
local nodes = views_only()
print(("peak tensor memory: carried state %.0f MB, replaced parameter %.0f MB (%d steps of 4 MB)"):format(
  carried, replaced, STEPS))
print(("views loop: at most %d live nodes over 200,000 steps"):format(nodes))
-- The bound: the 64 MB floor, doubled, plus the loop's own few live tensors.
assert(carried < 200, "a carried state's old tensors were not freed: peak " .. carried .. " MB")
assert(replaced < 200, "replaced parameters were not freed: peak " .. replaced .. " MB")
assert(nodes < 50000, "a loop of views kept " .. nodes .. " nodes alive")
