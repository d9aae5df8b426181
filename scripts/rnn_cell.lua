-- rnn_cell.lua: one step of a vanilla RNN cell, the lecture's "graph is created on the fly".
--   h2h = W_h · prev_hᵀ,  i2h = W_x · xᵀ,  next_h = tanh(h2h + i2h),  loss = sum(next_h)
-- Prints the loss and the gradient norms, and writes the graph (forward and backward) as SVG.
--   tapedeck scripts/rnn_cell.lua [graph.svg]
--   tapedeck -i scripts/rnn_cell.lua      then try  :graph loss   or   W_h.grad

local svg_path = arg and arg[1] or "rnn_cell.svg"
torch.manual_seed(0); torch.autograd.keep_backward_graph(true)   -- (the SVG shows the backward pass)

W_h = torch.randn(20, 20, {requires_grad = true})
W_x = torch.randn(20, 10, {requires_grad = true})
x = torch.randn(1, 10)
prev_h = torch.randn(1, 20)

h2h = torch.mm(W_h, prev_h:t())
i2h = torch.mm(W_x, x:t())
next_h = (h2h + i2h):tanh()
loss = next_h:sum()
loss:backward()

local function norm(t) return t:pow(2):sum():sqrt():item() end
print(("loss            %.4f"):format(loss:item()))
print(("|dloss/dW_h|    %.4f"):format(norm(W_h.grad)))
print(("|dloss/dW_x|    %.4f"):format(norm(W_x.grad)))
print(("graph: %d nodes (forward and backward)"):format(#torch.graph(loss)))
torch.graphviz(loss, svg_path)
print("wrote " .. svg_path)
