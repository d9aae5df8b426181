-- viewer_timeline.lua: what one step back on the viewer's timeline costs (target: <= 16 ms). The
-- unrolled RNN (scripts/rnn_unrolled.lua) of `steps` steps, forward and backward, stops at the last
-- tanh group of its backward pass; once the layout is there, the timeline moves back one event at a
-- time (viewer.timeline, as the slider or :back does) and each move's frame is timed: the model's
-- update and the drawing (viewer.frame_times().total). Then the same frames live, for comparison.
--   xvfb-run -a -s "-screen 0 1280x1024x24" tapedeck bench/viewer_timeline.lua [steps=50] [moves=60]
local steps = tonumber(arg and arg[1]) or 50
local moves = tonumber(arg and arg[2]) or 60

local ok, message = viewer.open(true)
if not ok then
  print("no window here: " .. tostring(message))
  return
end

local function summary(values)
  table.sort(values)
  return values[1], values[math.max(1, (#values + 1) // 2)], values[#values]
end

local function last_frames(n)
  local times = viewer.frame_times().total
  local out = {}
  for i = math.max(1, #times - n + 1), #times do out[#out + 1] = times[i] end
  return out
end

local report
local groups = 0
dbg.break_on{op = "tanh", phase = "bwd", action = function()
  groups = groups + 1
  if groups < steps then return end   -- the last tanh group: the whole backward pass but step 1's
  viewer.wait_layout(60)
  viewer.frame(5)
  local live_ms = {}
  for _ = 1, moves do
    viewer.frame(1)
  end
  live_ms = last_frames(moves)
  local t = viewer.timeline()
  for i = 1, moves do
    viewer.timeline(t.newest - i)
    viewer.frame(1)
  end
  local back_ms = last_frames(moves)
  local model = viewer.model()
  local hidden = 0
  for _, b in ipairs(model.boxes) do if b.later then hidden = hidden + 1 end end
  viewer.timeline("live")
  report = {live = {summary(live_ms)}, back = {summary(back_ms)}, boxes = #model.boxes, hidden = hidden,
            events = t.newest - t.oldest + 1}
end}

torch.manual_seed(0)
local W_h = (torch.randn(20, 20) * 0.1):requires_grad_(true)
local W_x = torch.randn(20, 10, {requires_grad = true})
local xs = torch.randn(steps, 10)
local h = torch.zeros(1, 20)
for t = 1, steps do
  local x = xs:narrow(1, t, 1)
  h = (torch.mm(W_h, h:t()) + torch.mm(W_x, x:t())):tanh():t()
end
h:sum():backward()

print(("rnn_unrolled %d steps: %d events in the history, %d boxes drawn (%d hidden %d events back)"):format(
  steps, report.events, report.boxes, report.hidden, moves))
print(("one step back on the timeline: %.1f / %.1f / %.1f ms a frame (min / median / max of %d)"):format(
  report.back[1], report.back[2], report.back[3], moves))
print(("the same frames live:          %.1f / %.1f / %.1f ms"):format(report.live[1], report.live[2], report.live[3]))
