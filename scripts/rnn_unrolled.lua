-- rnn_unrolled.lua: the lecture's RNN cell unrolled over a Lua loop, the hidden state fed back:
-- the graph's shape is whatever the loop made it (define-by-run). The step count is an argument.
--   tapedeck scripts/rnn_unrolled.lua [steps=50] [graph.svg]

local steps = tonumber(arg and arg[1]) or 50
local svg_path = arg and arg[2]
torch.manual_seed(0)

local W_h = (torch.randn(20, 20) * 0.1):requires_grad_(true)   -- small, so tanh does not saturate
local W_x = torch.randn(20, 10, {requires_grad = true})
local xs = torch.randn(steps, 10)     -- one input row per step
local h = torch.zeros(1, 20)

for t = 1, steps do
  local x = xs:narrow(1, t, 1)                               -- 1x10
  local h2h = torch.mm(W_h, h:t())
  local i2h = torch.mm(W_x, x:t())
  h = (h2h + i2h):tanh():t()                                 -- 1x20, fed to the next step
end
local loss = h:sum()
loss:backward()

local graph = torch.graph(loss)
local forward_nodes = 0
for _, n in ipairs(graph) do if n.phase == "forward" then forward_nodes = forward_nodes + 1 end end
print(("steps           %d"):format(steps))
print(("loss            %.4f"):format(loss:item()))
print(("|dloss/dW_h|    %.4f"):format(W_h.grad:pow(2):sum():sqrt():item()))
print(("|dloss/dW_x|    %.4f"):format(W_x.grad:pow(2):sum():sqrt():item()))
print(("graph           %d nodes (%d forward, %d backward)"):format(#graph, forward_nodes, #graph - forward_nodes))
if svg_path then
  torch.graphviz(loss, svg_path)
  print("wrote " .. svg_path)
end
