-- rewind_cell.lua: two training steps of the lecture's RNN cell (scripts/rnn_cell.lua), small, with
-- an optimizer step between them that changes W_h in place (for tests/repl/rewind.in).
torch.manual_seed(0)
W_h = torch.randn(4, 4, {requires_grad = true})
W_x = torch.randn(4, 3, {requires_grad = true})
x = torch.randn(1, 3)
prev_h = torch.randn(1, 4)
W_h_at_start = W_h:clone()   -- what W_h was before the first optimizer step
local opt = optim.SGD({W_h, W_x}, {lr = 0.5})
for step = 1, 2 do
  opt:zero_grad()
  h2h = torch.mm(W_h, prev_h:t())
  i2h = torch.mm(W_x, x:t())
  next_h = (h2h + i2h):tanh()
  loss = next_h:sum()
  loss:backward()
  opt:step()
end
