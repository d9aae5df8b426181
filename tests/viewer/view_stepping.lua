-- view_stepping.lua: a scripted debugging session. Break at the first node of the backward pass,
-- step three times (viewer.on_node stands in for the debugger: the stop is set through the
-- interface the debugger calls), a screenshot at each stop. The highlight must move along the
-- backward pass: each stop's box is the highlighted one, filled with the highlight colour, not yet
-- run, while the nodes before it have run.
local check = dofile(arg[1] .. "/viewer_check.lua")
check.start()
arg = {check.shots .. "/stepping.svg"}

local stops = {}
viewer.on_node(function(id, phase)
  if phase ~= "backward" or #stops >= 4 then return end
  viewer.set_stop(id, true)
  local shot = check.shot(("step%d.png"):format(#stops))
  local model = viewer.model()
  local box = check.box_of(model, id)
  stops[#stops + 1] = {
    id = id, shot = shot, highlighted = model.highlighted, count = model.highlighted_count,
    box = box, fraction = box and check.highlight_fraction(box) or 0,
    executed = box and box.executed,
  }
  -- the backward nodes of earlier stops have run by now
  for i = 1, #stops - 1 do
    local earlier = check.box_of(model, stops[i].id)
    assert(earlier and earlier.executed, ("#%d has run by the stop at #%d"):format(stops[i].id, id))
  end
  viewer.clear_stop()
end)
dofile(check.source .. "/scripts/rnn_cell.lua")
viewer.on_node(nil)

assert(#stops == 4, "a break and three steps in the backward pass, got " .. #stops)
for i, s in ipairs(stops) do
  print(("stop %d: #%d, highlighted #%s, highlight on %.0f%% of its box at (%.0f, %.0f), %s")
        :format(i - 1, s.id, tostring(s.highlighted), s.fraction * 100, s.box.x0, s.box.y0, s.shot))
  assert(s.count == 1 and s.highlighted == s.id, "the stopped node is the highlighted one")
  assert(s.fraction > 0.5, "the highlight colour fills the stopped box")
  assert(s.executed == false, "the stopped node has not run yet")
  if i > 1 then
    assert(s.id > stops[i - 1].id, "the stops follow the backward pass")
    local moved = s.box.x0 ~= stops[i - 1].box.x0 or s.box.y0 ~= stops[i - 1].box.y0
    assert(moved, "the highlight moved to another box")
  end
end
print("ok")
