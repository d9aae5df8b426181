-- test_animate.lua: backprop as an animation (viewer.animate, viewer.gif_info; :animate is
-- tests/repl/animate.in) on the lecture's RNN cell, scripts/rnn_cell.lua, run as it is:
--   * the pass the script recorded: a GIF that giflib reads back with one frame for the start, one
--     per forward op in record order, one per backward group in the order the pass ran them, one
--     for the end; 1280x720, looping, the delays asked for; every frame after the first redraws a
--     part only (the highlight moves);
--   * backward = true: the pass run again with its gradients kept, written as PNG frames at
--     640x360, each frame different from the one before;
--   * a chain too tall for the frame: the frames zoom in on the node computed;
--   * the numbers in the panel (values, arriving gradients, W_h.grad) are PyTorch's;
--   * bad input: a leaf, not a tensor, a bad size or delay, a path that cannot be written, a graph
--     too big, a file that is no GIF; a graph with no backward pass animates its forward pass.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")
local here = arg[0]:match("^(.*[/\\])") or "./"

local tmp = os.tmpname()
os.remove(tmp)
local script_arg = arg
arg = {tmp .. ".svg"}                -- rnn_cell.lua writes its graph there
dofile(here .. "../../scripts/rnn_cell.lua")
arg = script_arg
os.remove(tmp .. ".svg")

local function count(list, kind)
  local n = 0
  for _, f in ipairs(list) do if f.kind == kind then n = n + 1 end end
  return n
end

local function contains(list, text)
  for _, s in ipairs(list) do if s:find(text, 1, true) then return true end end
  return false
end

-- 1. The recorded pass, as a GIF. The forward ops: prev_h:t(), mm, x:t(), mm, add, tanh, sum; the
-- backward pass visits sum, tanh, add, mm (i2h), mm (h2h): newest first.
local gif = tmp .. ".gif"
local r = viewer.animate(loss, gif, {delay = 500})
check.equal(r.frames, 14, "frames: start + 7 forward + 5 backward + done")
check.equal(#r.steps, 14, "steps listed")
check.equal(r.steps[1].kind, "start", "first frame")
check.equal(count(r.steps, "forward"), 7, "forward frames")
check.equal(count(r.steps, "backward"), 5, "backward frames")
check.equal(r.steps[14].kind, "done", "last frame")
for i = 3, 8 do assert(r.steps[i].node > r.steps[i - 1].node, "forward frames in record order") end
check.equal(r.steps[8].node, loss.node, "the last forward op is the loss")
local groups = {loss.node, next_h.node, next_h.node - 1, i2h.node, h2h.node}
for i, id in ipairs(groups) do check.equal(r.steps[8 + i].node, id, "backward group " .. i) end
assert(r.steps[7].title:find("tanh", 1, true) and r.steps[7].title:find("next_h", 1, true), r.steps[7].title)
assert(r.steps[10].title:find("d loss / d next_h", 1, true), r.steps[10].title)
assert(contains(r.notes, "did not keep the gradients' values"), "says the recorded pass freed its gradients")
check.equal(r.message, ("wrote %s: 14 frames, 1280x720, %.1f s"):format(gif, r.seconds), "message")

local info = viewer.gif_info(gif)
check.equal(info.frames, 14, "frames in the GIF")
check.equal(info.width, 1280, "width")
check.equal(info.height, 720, "height")
assert(info.loops and info.loop_count == 0, "loops forever (NETSCAPE2.0)")
check.equal(info.delays[1], 1500, "the first frame stays 3x as long")
check.equal(info.delays[2], 500, "delay")
check.equal(info.delays[14], 1500, "the last frame stays 3x as long")
check.equal(info.changed[1], 1280 * 720, "the first frame is whole")
for i = 2, 14 do
  assert(info.changed[i] > 1000 and info.changed[i] < 1280 * 720, "frame " .. i .. " redraws a part: " .. info.changed[i])
end
os.remove(gif)

-- 2. backward = true: the pass runs again, watched, so the gradients are kept; PNG frames.
local grad_before = W_h.grad:clone()
local dir = tmp .. "_frames"
local r2 = viewer.animate(loss, dir, {size = {640, 360}, delay = 200, backward = true})
check.equal(r2.frames, 14, "frames with backward = true")
check.equal(#r2.notes, 0, "nothing to say (every gradient kept, labels legible at this size): " .. tostring(r2.notes[1]))
check.close(W_h.grad, grad_before * 2, 1e-6, "the pass ran once more (gradients accumulate)")
for i, id in ipairs(groups) do check.equal(r2.steps[8 + i].node, id, "backward group " .. i .. " as it ran") end
local previous
for i = 1, 14 do
  local path = ("%s/frame_%04d.png"):format(dir, i)
  local f = assert(io.open(path, "rb"), "frame " .. i .. " written")
  local bytes = f:read("a")
  f:close()
  check.equal(bytes:sub(1, 8), "\137PNG\r\n\26\n", "PNG signature")
  check.equal(string.unpack(">I4", bytes, 17), 640, "PNG width")
  check.equal(string.unpack(">I4", bytes, 21), 360, "PNG height")
  assert(bytes ~= previous, "frame " .. i .. " differs from the one before")
  previous = bytes
  os.remove(path)
end
os.remove(dir)

-- 3. A graph with no backward pass: its forward pass only, and a note saying how to get the rest.
local y = (W_x * 2):sum()
local r3 = viewer.animate(y, gif)
check.equal(r3.frames, 3, "start + mul + sum, no backward frames")
assert(contains(r3.notes, "no backward pass"), "says there is no backward pass")
os.remove(gif)

-- 4. A graph too tall to fit legibly (a chain of 60 tanh): the frames zoom in on the node computed.
local c = W_x
for _ = 1, 60 do c = c:tanh() end
c = c:sum()
local r4 = viewer.animate(c, gif, {backward = true})
check.equal(r4.frames, 1 + 61 + 61 + 1, "start + 61 forward + 61 backward + done")
assert(contains(r4.notes, "zoom in on the node computed"), "says the frames zoom in: " .. tostring(r4.notes[1]))
local info4 = viewer.gif_info(gif)
check.equal(info4.frames, r4.frames, "frames in the GIF")
os.remove(gif)

-- 5. The numbers the panel shows are PyTorch's (tests/oracle/make_animate_oracle.py): the value
-- of each forward op, the gradient arriving at each node whose rule runs, W_h.grad at the end.
do
  local oracle = dofile(here .. "../oracle/animate_oracle_data.lua")
  local function input(entry) return check.entry_tensor(entry):detach() end   -- a leaf, not a reshape's output
  local W_h = input(oracle.W_h):requires_grad_()
  local W_x = input(oracle.W_x):requires_grad_()
  local x, prev_h = input(oracle.x), input(oracle.prev_h)
  local h2h = torch.mm(W_h, prev_h:t())
  local i2h = torch.mm(W_x, x:t())
  local next_h = (h2h + i2h):tanh()
  local loss = next_h:sum()
  local r5 = viewer.animate(loss, gif, {backward = true})
  os.remove(gif)
  local function same(step, expected, what)
    assert(step.value, what .. ": the panel shows no numbers")
    check.close({step.value.min, step.value.max, step.value.mean, step.value.norm},
                {expected.min, expected.max, expected.mean, expected.norm}, 1e-9, what)
  end
  for i, expected in ipairs(oracle.forward) do same(r5.steps[1 + i], expected, "forward frame " .. i) end
  for i, expected in ipairs(oracle.backward) do same(r5.steps[8 + i], expected, "backward frame " .. i) end
  check.equal(r5.steps[14].heading, "d loss / d W_h", "the end shows W_h's gradient")
  same(r5.steps[14], oracle.W_h_grad, "W_h.grad")
end

-- 6. Bad input.
check.fails("viewer.animate", "is a leaf", function() viewer.animate(W_h, gif) end)
check.fails("viewer.animate", "the loss must be a tensor, got number", function() viewer.animate(42, gif) end)
check.fails("viewer.animate", "outside 320x180", function() viewer.animate(loss, gif, {size = {10, 10}}) end)
check.fails("viewer.animate", "size must be {width, height}", function() viewer.animate(loss, gif, {size = 3}) end)
check.fails("viewer.animate", "delay 5 ms", function() viewer.animate(loss, gif, {delay = 5}) end)
check.fails("viewer.animate", "cannot write /nonexistent_dir/x.gif", function() viewer.animate(loss, "/nonexistent_dir/x.gif") end)
check.fails("viewer.animate", "cannot make the directory", function() viewer.animate(loss, "/nonexistent_dir/frames/") end)
local h = W_h
for _ = 1, 250 do h = h:tanh() end
h = h:sum()
h:backward()
check.fails("viewer.animate", "more than 400", function() viewer.animate(h, gif) end)
local text = tmp .. ".txt"
local f = assert(io.open(text, "w"))
f:write("not a GIF\n")
f:close()
check.fails("viewer.gif_info", "cannot read", function() viewer.gif_info(text) end)
os.remove(text)
assert(io.open(gif) == nil, "no file left by the failed calls")
print("test_animate: ok")
