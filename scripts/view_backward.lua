-- view_backward.lua: the backward pass of the lecture's RNN cell, watched in the viewer one node at
-- a time. Each backward node is highlighted before it runs (the way the debugger shows a stop),
-- the window keeps drawing while it waits, and the graph grows as the gradient nodes are recorded.
--   tapedeck scripts/view_backward.lua [seconds per node = 0.7]
--   xvfb-run -a tapedeck scripts/view_backward.lua 0 out.png   the stop at tanh's gradient as a PNG
-- (The debugger -- :break bwd tanh, :step -- does this from the prompt; this script needs none.)
local pause = tonumber(arg and arg[1]) or 0.7
local shot = arg and arg[2]
local ok, message = viewer.open(shot ~= nil)   -- hidden when it only writes a PNG
if not ok then error("viewer: " .. message) end
torch.manual_seed(0)

W_h = torch.randn(20, 20, {requires_grad = true})
W_x = torch.randn(20, 10, {requires_grad = true})
x = torch.randn(1, 10)
prev_h = torch.randn(1, 20)

h2h = torch.mm(W_h, prev_h:t())
i2h = torch.mm(W_x, x:t())
next_h = (h2h + i2h):tanh()
loss = next_h:sum()

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
loss:backward()
viewer.on_node(nil)
viewer.clear_stop()
print(("loss %.4f  |dloss/dW_h| %.4f"):format(loss:item(), W_h.grad:pow(2):sum():sqrt():item()))
if not shot then viewer.wait(pause * 3) end
