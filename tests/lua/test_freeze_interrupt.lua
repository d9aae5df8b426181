-- Ctrl-C while torch.freeze runs interrupts it: a SIGINT that lands while it names the captured
-- tensors (a walk of the globals, whose metamethods it calls under pcall) or while it records the
-- call is raised as "interrupted!", never swallowed; the globals and hooks are put back. The
-- signal is real: the script sends it to itself (kill through io.popen, which, unlike os.execute,
-- does not ignore SIGINT while it waits).
local stat = io.open("/proc/self/stat")
if not stat then
  print("test_freeze_interrupt: skipped (no /proc/self/stat)")
  return
end
local pid = stat:read("l"):match("^(%d+)")
stat:close()
local function interrupt_self()
  local p = io.popen("kill -INT " .. pid)
  p:read("a")
  p:close()
  local s = 0
  for i = 1, 100000 do s = s + i end   -- the interrupt lands here, at the next instruction
  return s
end

local w = torch.randn(3, {requires_grad = true})
local step = function(x) return (x * w):sum() end

-- While naming the captured tensors: `trap` is a global table the naming walk reads fields of.
local sent = false
trap = setmetatable({}, {__index = function()
  if not sent then sent = true; interrupt_self() end
  return nil
end})
local ok, message = pcall(torch.freeze, step, torch.ones(3))
assert(sent, "the naming walk read the trap's fields")
assert(not ok and tostring(message):find("interrupted!", 1, true), "the interrupt was swallowed: " .. tostring(message))
trap = nil
io.popen("sleep 1.2"):close()   -- two Ctrl-C within a second leave the program

-- While recording: the interrupt stops the recorded call; the globals are the globals again, no
-- hook is left, and the next freeze works.
ok, message = pcall(torch.freeze, function(x) interrupt_self(); return step(x) end, torch.ones(3))
assert(not ok and tostring(message):find("interrupted!", 1, true), tostring(message))
assert(getmetatable(_ENV) == nil and rawget(_ENV, "torch") == torch, "the globals are the globals again")
assert(debug.gethook() == nil, "no hook left behind")
local f = torch.freeze(step, torch.ones(3))
assert(math.abs(f(torch.ones(3)):item() - w:sum():item()) < 1e-6)
print("test_freeze_interrupt: ok")
