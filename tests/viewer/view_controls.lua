-- view_controls.lua: the controls and menus call the debugger's callbacks (registered through the
-- interface; here from Lua), and are disabled without them: Step and Continue buttons, the
-- right-click menu's breakpoint items, the Source window's gutter. Breakpoint markers given
-- through the interface are drawn.
local check = dofile(arg[1] .. "/viewer_check.lua")
check.start()
arg = {check.shots .. "/controls.svg"}
dofile(check.source .. "/scripts/rnn_cell.lua")
local tanh
for _, node in ipairs(torch.tape()) do if node.op == "tanh" then tanh = node.id end end
viewer.set_stop(tanh, false)
assert(viewer.wait_layout())
viewer.frame(2)

-- No debugger: clicking does nothing.
viewer.click("Step")
viewer.click("Continue")

local calls = {}
viewer.set_controls{
  step = function() calls[#calls + 1] = "step" end,
  continue = function() calls[#calls + 1] = "continue" end,
  break_node = function(id) calls[#calls + 1] = "break_node " .. id end,
  break_line = function(file, line) calls[#calls + 1] = "break_line " .. line end,
}
viewer.frame(2)
viewer.click("Step")
viewer.click("Continue")
viewer.click("Finish")   -- not registered: disabled
assert(calls[1] == "step" and calls[2] == "continue" and #calls == 2,
       "Step and Continue call the debugger, Finish is disabled: " .. table.concat(calls, ", "))

-- Right-click on the tanh box: "Break at #tanh".
local box = check.box_of(viewer.model(), tanh)
viewer.click((box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2, "right")
viewer.click("Break at #" .. tanh)
assert(calls[3] == "break_node " .. tanh, "the menu sets a breakpoint on the node: " .. tostring(calls[3]))

-- The Source window's gutter: a line breakpoint on the stop's line (17).
viewer.click("gutter 17")
assert(calls[4] == "break_line 17", "the gutter sets a line breakpoint: " .. tostring(calls[4]))

-- Markers given through the interface.
viewer.set_breakpoints{{node = tanh}, {file = check.source .. "/scripts/rnn_cell.lua", line = 17}}
check.shot("breakpoints.png")
local r, g, b = viewer.pixel(math.floor(box.x0) + 4, math.floor(box.y0) + 4)
assert(r > 180 and g < 80 and b < 80, ("a red breakpoint dot on the node's corner, got %d,%d,%d"):format(r, g, b))
viewer.set_controls(nil)
print("ok")
