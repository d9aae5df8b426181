-- view_backward.lua: the backward pass of the lecture's RNN cell (scripts/rnn_cell.lua), watched
-- in the viewer one node at a time. Each backward node is highlighted before it runs (the way the
-- debugger shows a stop), the window keeps drawing while it waits, and the graph grows as the
-- gradient nodes are recorded.
--   tapedeck scripts/view_backward.lua [seconds per node = 0.7]
--   xvfb-run -a tapedeck scripts/view_backward.lua 0 out.png   the stop at tanh's gradient as a PNG
-- (The debugger -- :break bwd tanh, :step -- does this from the prompt; this script needs none.)
local pause = tonumber(arg and arg[1]) or 0.7
local shot = arg and arg[2]
local ok, message = viewer.open(shot ~= nil)   -- hidden when it only writes a PNG
if not ok then error("viewer: " .. message) end

viewer.on_node(function(id, phase)
  if phase ~= "backward" then return end
  viewer.set_stop(id, true)
  viewer.wait(pause)
  local newest = torch.tape()[#torch.tape()]   -- the node about to run
  if shot and newest.id == id and newest.op == "tanh_backward" then
    assert(viewer.screenshot(shot))
    print("wrote " .. shot)
  end
end)
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local scratch = os.tmpname()
arg = {scratch .. ".svg"}   -- rnn_cell.lua also writes its graph as SVG: somewhere to throw away
dofile(here .. "rnn_cell.lua")
os.remove(scratch .. ".svg")
os.remove(scratch)
viewer.on_node(nil)
viewer.clear_stop()
if not shot then viewer.wait(pause * 3) end
