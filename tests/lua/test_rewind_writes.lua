-- The rewind history keeps a value it holds as it was, whoever writes it afterwards (engine/core/history.h):
-- an eager in-place op goes through exec_node, a frozen call's compiled steps (run when nothing
-- observes) through plan.cpp's own kernel calls; both copy the held storage first.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

torch.manual_seed(0)
local W = torch.randn(3, 3, {requires_grad = true})
local x = torch.randn(3, 3)
local function step(x) local l = (W * x):sum(); l:backward(); return l end
local f = torch.freeze{step, x, name = "f"}
f(x)                                                  -- W.grad exists

local id = dbg.break_on{op = "exp", phase = "fwd"}   -- the history records while it is set
local seen = W.grad * 1                               -- an event: it holds W.grad's storage
local h = dbg.history()
check.equal(h.events, 1, "one event: the mul")
check.equal(h.copies, 0, "nothing written yet")

-- 1. Eager, in place (under the breakpoint): W.grad:add_ copies the held bytes first.
torch.no_grad(function() W.grad:add_(1) end)
local copies_eager = dbg.history().copies
assert(copies_eager > 0, "an eager in-place write to a held storage is copied first")
dbg.delete(id)

-- 2. A frozen call with nothing observing: its compiled step accumulates into W.grad in place.
local before = W.grad:clone()
f(x)
assert((W.grad - before):abs():max():item() > 0, "the frozen call changed W.grad")
assert(dbg.history().copies > copies_eager, "the compiled step copied the held storage before writing it")

dbg.history("off")
check.equal(dbg.history().copies, 0, "off lets the copies go")
print("ok")
