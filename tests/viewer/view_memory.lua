-- view_memory.lua: the window's memory is bounded whatever the tape length: a 2,000-step training
-- loop with the window open keeps at most its history of nodes alive, and the viewer's records
-- follow the tape.
local check = dofile(arg[1] .. "/viewer_check.lua")
check.start()
viewer.options{history = 500}
torch.manual_seed(0)
local w = torch.randn(10, 10, {requires_grad = true})
local x = torch.randn(4, 10)
local peak_nodes = 0
for step = 1, 2000 do
  local loss = x:mm(w):tanh():pow(2):sum()
  loss:backward()
  torch.no_grad(function() w:sub_(w.grad, 0.01); w.grad:zero_() end)
  if step % 100 == 0 then
    collectgarbage()
    viewer.frame(1)
    local live = select(2, torch.memory())
    peak_nodes = math.max(peak_nodes, live)
  end
end
local model = viewer.model()
print(("peak %d live nodes, window history %d, records %d"):format(peak_nodes, model.history, model.records))
assert(model.history <= 500, "the window keeps at most its history")
assert(peak_nodes < 2000, "the tape does not grow with the steps: " .. peak_nodes)
print("ok")
