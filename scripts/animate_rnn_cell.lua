-- animate_rnn_cell.lua: backprop through the lecture's RNN cell (scripts/rnn_cell.lua) as a GIF,
-- the picture in the README: the forward values fill in op by op, then the gradients flow back
-- group by group, each node highlighted with its value or gradient (docs/viewer.md, "Backprop as
-- an animation").
--   tapedeck scripts/animate_rnn_cell.lua [out.gif | frames/] [WIDTHxHEIGHT]
local path = arg and arg[1] or "backprop_rnn_cell.gif"
local width, height = (arg and arg[2] or "1280x720"):match("^(%d+)x(%d+)$")
torch.manual_seed(0)

W_h = torch.randn(20, 20, {requires_grad = true})
W_x = torch.randn(20, 10, {requires_grad = true})
x = torch.randn(1, 10)
prev_h = torch.randn(1, 20)

h2h = torch.mm(W_h, prev_h:t())
i2h = torch.mm(W_x, x:t())
next_h = (h2h + i2h):tanh()
loss = next_h:sum()

-- backward = true runs loss:backward() with every gradient kept for the frames (as :animate
-- loss out.gif --backward does at the prompt).
local result = viewer.animate(loss, path, {backward = true, size = {tonumber(width), tonumber(height)}, delay = 1100})
print(result.message)
for _, note in ipairs(result.notes) do print("  (" .. note .. ")") end
