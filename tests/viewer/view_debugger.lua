-- view_debugger.lua: the real debugger drives the window. A breakpoint in the backward pass of
-- tanh, then three steps (the second by the window's Step button), a screenshot at each stop:
-- the highlighted box is the stop's (the newest gradient node of the stopped group, which has run),
-- it moves along the backward pass, and the buttons are live only while stopped. Breakpoints set
-- from the window's menus are the debugger's, and the debugger's are marked in the window.
local check = dofile(arg[1] .. "/viewer_check.lua")
check.start()
local script = check.source .. "/scripts/rnn_cell.lua"
arg = {check.shots .. "/debugger.svg"}

local function tape_node(id)
  for _, n in ipairs(torch.tape()) do if n.id == id then return n end end
end

local tanh_break = dbg.break_on{op = "tanh", phase = "bwd"}
local stops = {}
dbg.on_stop(function(stop)
  local model = viewer.model()
  local shot = check.shot(("debugger_step%d.png"):format(#stops))
  model = viewer.model()
  local box = model.highlighted and check.box_of(model, model.highlighted)
  stops[#stops + 1] = {
    group = stop.node.id, phase = stop.stop.phase, highlighted = model.highlighted,
    count = model.highlighted_count, box = box, shot = shot,
    fraction = box and check.highlight_fraction(box) or 0, executed = box and box.executed,
    can_step = model.can_step,
  }
  if #stops == 2 then
    viewer.click("Step")   -- the window's button ends the stop as dbg.step() would
  elseif #stops < 4 then
    dbg.step()
  else
    dbg.continue()
  end
end)
dofile(script)
dbg.on_stop(nil)
dbg.delete(tanh_break)

assert(#stops == 4, "a breakpoint and three steps stop four times, got " .. #stops)
for i, s in ipairs(stops) do
  print(("stop %d: group #%d, highlighted #%s, highlight on %.0f%% of its box, %s")
        :format(i - 1, s.group, tostring(s.highlighted), s.fraction * 100, s.shot))
  assert(s.phase == "backward", "every stop is in the backward pass")
  assert(s.count == 1, "one box is highlighted")
  local node = tape_node(s.highlighted)
  -- the group's newest gradient node; the forward node itself when its rule recorded none (add
  -- passes its gradient on unchanged)
  assert(node and ((node.phase == "backward" and node.group == s.group) or node.id == s.group),
         "the highlighted box is the stopped group #" .. s.group .. "'s")
  assert(s.fraction > 0.5, "the highlight colour fills the stopped box")
  assert(s.executed == true, "the stopped group's gradients have run")
  assert(s.can_step, "the Step button is live at a stop")
  if i > 1 then
    assert(s.group < stops[i - 1].group, "the stops go back along the backward pass")
    assert(s.box.x0 ~= stops[i - 1].box.x0 or s.box.y0 ~= stops[i - 1].box.y0, "the highlight moved")
  end
end

-- Back at the top: nothing highlighted, the resume buttons are grey, the menus still work.
viewer.frame(2)
assert(viewer.model().highlighted_count == 0, "no highlight once the run is over")
assert(not viewer.model().can_step and viewer.model().can_break, "at the top, Step is grey; the breakpoint menus work")
local tanh
for _, n in ipairs(torch.tape()) do if n.op == "tanh" and n.phase == "forward" then tanh = n.id end end
assert(viewer.wait_layout())
viewer.frame(2)
local box = check.box_of(viewer.model(), tanh)
viewer.click((box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2, "right")
viewer.click("Break at #" .. tanh)
local found
for _, b in ipairs(dbg.breaks()) do if b.description:find("node #" .. tanh, 1, true) then found = b.id end end
assert(found, "the menu added a debugger breakpoint on the node")
viewer.frame(2)
check.shot("debugger_break_marker.png")
local r, g, b = viewer.pixel(math.floor(box.x0) + 4, math.floor(box.y0) + 4)
assert(r > 180 and g < 80 and b < 80, ("a red breakpoint dot on the node's corner, got %d,%d,%d"):format(r, g, b))
viewer.click((box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2, "right")
viewer.click("Break at #" .. tanh)
assert(#dbg.breaks() == 0, "the same menu item deletes it")

-- The Source window's gutter: a line breakpoint, which the debugger stops at.
viewer.select(tanh)
viewer.frame(2)
viewer.click("gutter 17")
local line_break = dbg.breaks()[1]
assert(line_break and line_break.description:find(":17"), "the gutter added a line breakpoint: " ..
       tostring(line_break and line_break.description))
local line_stops = {}
dbg.on_stop(function(stop)
  viewer.frame(2)
  local model = viewer.model()
  line_stops[#line_stops + 1] = {line = stop.stop.line, viewer_line = model.stop_line, viewer_file = model.stop_file}
  check.shot("debugger_line_stop.png")
  dbg.continue()
end)
dofile(script)
dbg.on_stop(nil)
assert(#line_stops == 1 and line_stops[1].line == 17, "the line breakpoint stopped once, at line 17")
assert(line_stops[1].viewer_line == 17 and line_stops[1].viewer_file:find("rnn_cell.lua", 1, true),
       "the Source window marks the stopped line: " .. line_stops[1].viewer_file .. ":" .. line_stops[1].viewer_line)
viewer.frame(2)
assert(viewer.model().stop_line == 0, "the line mark goes when the run goes on")
print("ok")
