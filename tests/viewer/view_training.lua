-- view_training.lua: the Training window on a real model. Run as
--   run_headless.sh tapedeck view_training.lua TESTS SHOTS SOURCE [STEPS]   (ctest: 20 steps)
-- Trains scripts/models/char_lstm.lua for STEPS steps (20) with the window open, logging a
-- histogram of the embedding's weights at every step (the optimizer logs the loss, the gradient
-- norms and the update ratios by itself), then shows the Training window and checks:
--   - its five plots are drawn (loss, gradient flow, gradient norms, update ratios, the histogram
--     picked by viewer.show), each a texture of cairo's pixels: the plot's background colour at
--     its corner, many colours inside;
--   - the Controls' Graph / Training button switches between it and the Graph window;
-- and writes view_training.png (docs/viewer.md's picture: STEPS = 100).
local check = dofile(arg[1] .. "/viewer_check.lua")
local steps = tonumber(arg[4] or "") or 20   -- ctest passes the tapedeck path here: 20
check.start()

-- The embedding's weights, logged after every step (the first parameter the optimizer updates).
local step = optim.Optimizer.step
optim.Optimizer.step = function(self, ...)
  local result = step(self, ...)
  viewer.log("embed.weight", self.params[1])
  return result
end
local script = check.source .. "/scripts/models/char_lstm.lua"
arg = {[0] = script, "--steps", tostring(steps)}
dofile(script)
optim.Optimizer.step = step

local listing = viewer.series()
assert(viewer.step() == steps, "steps counted: " .. viewer.step())
assert(#listing.parameters >= 5, "parameters logged: " .. #listing.parameters)
assert(listing.parameters[1]:find("^model%."), "named after the script's local `model`: " .. listing.parameters[1])
assert(#viewer.series("loss").values == steps)

viewer.show("training", "hist embed.weight")
viewer.frame(4)
assert(viewer.capture())
local BACKGROUND = {247, 247, 245}   -- plot_render.cpp's page colour (0.97, 0.97, 0.96), +-1 for cairo's rounding
for _, what in ipairs{"loss", "flow", "grad_norm", "update_ratio", "hist embed.weight"} do
  local x0, y0, x1, y1 = viewer.item_rect("plot " .. what)
  assert(x0, "the Training window drew no plot '" .. what .. "'")
  assert(x1 - x0 > 150 and y1 - y0 > 100, what .. " is " .. (x1 - x0) .. "x" .. (y1 - y0))
  local r, g, b = viewer.pixel(math.floor(x0) + 2, math.floor(y0) + 2)
  local near = math.abs(r - BACKGROUND[1]) <= 1 and math.abs(g - BACKGROUND[2]) <= 1 and math.abs(b - BACKGROUND[3]) <= 1
  assert(near,
         string.format("%s: corner pixel %d,%d,%d is not the plot's background", what, r, g, b))
  local colours = {}
  local count = 0
  for y = math.floor(y0) + 1, math.floor(y1) - 1, 3 do
    for x = math.floor(x0) + 1, math.floor(x1) - 1, 3 do
      local pr, pg, pb = viewer.pixel(x, y)
      local key = pr * 65536 + pg * 256 + pb
      if not colours[key] then colours[key] = true; count = count + 1 end
    end
  end
  assert(count > 20, what .. " looks blank: " .. count .. " colours")
end
local shot = check.shot("view_training.png")
print("wrote " .. shot)

-- The Controls' button goes back to the Graph window and to the Training window again.
viewer.click("Graph")
viewer.frame(2)
assert(viewer.item_rect("plot loss") == nil, "the Training window is gone")
assert(#viewer.model().boxes > 0, "the Graph window is back")
viewer.click("Training")
viewer.frame(2)
assert(viewer.item_rect("plot loss"), "the Training window is back")
viewer.show("graph")
viewer.frame(2)
assert(viewer.item_rect("plot loss") == nil)
print("view_training: ok")
