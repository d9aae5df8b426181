-- used by interrupt_twice.sh: a long run that survives one Ctrl-C (as a training loop that catches
-- an interrupt to save a checkpoint and goes on), so only a second one can end it
print("running")
io.stdout:flush()
local x = torch.ones(8, 8)
while true do
  local ok, err = pcall(function()
    while true do x = (x * 0.5 + 0.5):tanh() end
  end)
  print("caught: " .. tostring(err):match("interrupted!") .. " (going on)")
  io.stdout:flush()
end
