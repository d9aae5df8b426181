-- view_backward.lua: the backward pass of the lecture's RNN cell (scripts/rnn_cell.lua), stepped
-- by the debugger and watched in the viewer: a breakpoint at the gradient of tanh, then a step to
-- each gradient group in turn, each stop highlighted while the window keeps drawing. The same as
-- typing, at `tapedeck -i scripts/rnn_cell.lua`:  :view   :break bwd tanh   loss:backward()   :step ...
--   tapedeck scripts/view_backward.lua [seconds per stop = 0.7]
--   xvfb-run -a tapedeck scripts/view_backward.lua 0 out.png   the stop at tanh's gradient as a PNG
local pause = tonumber(arg and arg[1]) or 0.7
local shot = arg and arg[2]
local ok, message = viewer.open(shot ~= nil)   -- hidden when it only writes a PNG
if not ok then error("viewer: " .. message) end

local tanh_break = dbg.break_on{op = "tanh", phase = "bwd"}
dbg.on_stop(function(stop)
  if stop.stop.phase ~= "backward" then return dbg.continue() end   -- the backward pass is over
  print(dbg.banner())
  if shot and stop.stop.breakpoint == tanh_break then
    assert(viewer.screenshot(shot))
    print("wrote " .. shot)
  end
  viewer.wait(pause)
  dbg.step()
end)
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local scratch = os.tmpname()
arg = {scratch .. ".svg"}   -- rnn_cell.lua also writes its graph as SVG: somewhere to throw away
dofile(here .. "rnn_cell.lua")
os.remove(scratch .. ".svg")
os.remove(scratch)
dbg.on_stop(nil)
dbg.delete(tanh_break)
if not shot then viewer.wait(pause * 3) end
