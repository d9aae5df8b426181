-- page_rnn_cell.lua OUT.html: the lecture's RNN cell (scripts/rnn_cell.lua), stepped by the
-- debugger from its first op through its backward pass (so the rewind history holds every forward
-- op and backward group), exported as a page at the stop in tanh's backward group. For
-- test_page_browser.py; prints the export's message.
local out = assert(arg[1], "usage: tapedeck page_rnn_cell.lua OUT.html")
torch.manual_seed(0)
W_h = torch.randn(20, 20, {requires_grad = true})
W_x = torch.randn(20, 10, {requires_grad = true})
x = torch.randn(1, 10)
prev_h = torch.randn(1, 20)

local exported
dbg.on_stop(function(stop)
  local s = stop.stop
  if s and s.phase == "backward" and stop.node and stop.node.op == "tanh" and not exported then
    exported = viewer.export_page(out)
    return dbg.continue()
  end
  dbg.step()
end)
dbg.pause()
h2h = torch.mm(W_h, prev_h:t())
i2h = torch.mm(W_x, x:t())
next_h = (h2h + i2h):tanh()
loss = next_h:sum()
loss:backward()
dbg.continue()   -- not stopped: cancels a step the last stop asked for
dbg.on_stop(nil)
assert(exported, "page_rnn_cell.lua: the backward pass never stopped in tanh's group")
print(exported.message)
-- What the page's panel must show, computed here (test_page_browser.py compares).
print(string.format("W_h min %.4g max %.4g", W_h:min():item(), W_h:max():item()))
print(string.format("next_h min %.4g max %.4g", next_h:min():item(), next_h:max():item()))
