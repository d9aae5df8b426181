-- view_timeline.lua: the timeline (viewer/window/window_timeline.cpp) — the graph as it stood at an event
-- of the rewind history. Stopped at the gradient of tanh in the lecture's RNN cell, the debugger's
-- :back and viewer.timeline() move it: boxes of nodes recorded after the event are hidden (the
-- layout stays: the same boxes at the same places), the event's node is the one highlighted box,
-- the Tensor window shows its values as they were; live again, nothing is hidden. Prints the
-- frame time of one step back (the redraw: no layout).
local check = dofile(arg[1] .. "/viewer_check.lua")
check.start()
local script = check.source .. "/scripts/rnn_cell.lua"
arg = {check.shots .. "/timeline.svg"}

local function hidden_and_shown(model)
  local hidden, shown = {}, {}
  for _, b in ipairs(model.boxes) do
    if b.node and b.node > 0 then
      if b.later then hidden[#hidden + 1] = b else shown[#shown + 1] = b end
    end
  end
  return hidden, shown
end

local result = {}
local tanh_break = dbg.break_on{op = "tanh", phase = "bwd"}
dbg.on_stop(function(stop)
  assert(viewer.wait_layout())
  viewer.frame(2)
  local live = viewer.model()
  local hidden = hidden_and_shown(live)
  assert(#hidden == 0, "live: nothing hidden")
  local places = {}
  for _, b in ipairs(live.boxes) do places[b.key] = {b.x0, b.y0} end

  -- Two events back: the forward sum (the loss), before the backward pass recorded anything.
  dbg.command(":back 2")
  local t = viewer.timeline()
  assert(t.serial > 0 and t.serial == t.newest - 2, "the debugger's :back moved the timeline")
  viewer.frame(2)
  local model = viewer.model()
  local hidden_boxes, shown_boxes = hidden_and_shown(model)
  assert(#hidden_boxes > 0, "the backward nodes recorded later are hidden")
  for _, b in ipairs(hidden_boxes) do assert(b.node > t.newest_id, "only nodes recorded after the event are hidden") end
  for _, b in ipairs(shown_boxes) do assert(b.node <= t.newest_id, "every node that existed is shown") end
  -- The layout stays: every box where it was relative to the others (boxes are in window pixels,
  -- and the camera may scroll the event's node into view: a pan moves them all alike).
  local pan_x, pan_y
  for _, b in ipairs(model.boxes) do
    assert(places[b.key], "the layout stays: box " .. b.key .. " was laid out live")
    pan_x, pan_y = pan_x or b.x0 - places[b.key][1], pan_y or b.y0 - places[b.key][2]
    assert(math.abs(b.x0 - places[b.key][1] - pan_x) < 0.5 and math.abs(b.y0 - places[b.key][2] - pan_y) < 0.5,
           "the layout stays: box " .. b.key .. " moved against the others")
  end
  assert(model.highlighted == t.node and model.highlighted_count == 1, "the event's node is the one highlighted box")
  local box = check.box_of(model, t.node)
  check.shot("timeline_back2.png")
  assert(check.highlight_fraction(box) > 0.5, "the highlight colour fills the event's box")
  local stats = viewer.inspect()
  assert(stats and stats.count == 1, "the Tensor window shows the event's node (the loss, one element)")
  result.back2 = {hidden = #hidden_boxes, shown = #shown_boxes, node = t.node}

  -- One step back at a time with viewer.timeline: each a redraw, no layout.
  local serial = t.serial
  for i = 1, 6 do
    viewer.timeline(serial - i)
    viewer.frame(1)
  end
  local times = viewer.frame_times().total
  local last = {}
  for i = #times - 5, #times do last[#last + 1] = times[i] end
  table.sort(last)
  result.step_ms = {last[1], last[#last // 2 + 1], last[#last]}
  local model6 = viewer.model()
  local hidden6 = hidden_and_shown(model6)
  assert(#hidden6 > #hidden_boxes, "further back, more is hidden")

  dbg.command(":forward 100")
  assert(viewer.timeline().serial == 0, ":forward back to the live stop: the timeline is live")
  viewer.timeline(-3)
  assert(viewer.timeline().serial == viewer.timeline().newest - 3, "viewer.timeline(-3): three before the newest")
  viewer.timeline("live")
  viewer.frame(2)
  assert(#hidden_and_shown(viewer.model()) == 0, "live again: nothing hidden")
  assert(not pcall(viewer.timeline, 10 ^ 9), "an event that is not listed is an error")
  viewer.timeline(-1)   -- the loss's gradient group: the backward pass as far as it had come
  viewer.frame(2)
  check.shot("timeline.png")   -- docs/viewer.md's picture (assets/viewer_timeline.png)
  dbg.continue()
end)
dofile(script)
dbg.on_stop(nil)
dbg.delete(tanh_break)
assert(result.back2, "stopped at the gradient of tanh")
assert(viewer.timeline().serial == 0, "the stop ended: live")
print(("two events back: #%d highlighted, %d boxes hidden, %d shown; one step back redraws in %.1f / %.1f / %.1f ms (min / median / max of 6)")
      :format(result.back2.node, result.back2.hidden, result.back2.shown, result.step_ms[1], result.step_ms[2], result.step_ms[3]))
