-- The rewind history's budget bounds what the process really grows by (docs/debugger.md, "The
-- budget"): a run of many small ops under a watching debugger makes ~100,000 events whose records
-- and small storages weigh more than their values; the resident memory the history adds stays near
-- its budget (it grew 1.5-2.2 times the budget while its own count stayed within it). Linux only
-- (/proc/self/statm); skipped elsewhere.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

local statm = io.open("/proc/self/statm")
if not statm then print("skipped: no /proc/self/statm") return end
statm:close()
local function rss_bytes()
  local f = io.open("/proc/self/statm")
  local _, resident = f:read("n", "n")
  f:close()
  return resident * 4096
end

-- 60,000 small forward ops (each an event holding its [8] input and output), from one tensor.
local function run()
  local h = torch.ones(8)
  for _ = 1, 60000 do h = h * 1.0001 end
  return h
end

-- A breakpoint that never stops makes the debugger look at values, so the history records.
local id = dbg.break_on{op = "tanh", phase = "fwd"}
dbg.history("off")
run(); collectgarbage(); collectgarbage()
run(); collectgarbage(); collectgarbage()   -- the allocator's caches and the tape's spares are warm now
local before = rss_bytes()

local BUDGET = 16 * 1024 * 1024
dbg.history("16MB")
local kept = run()
collectgarbage(); collectgarbage()
local h = dbg.history()
local grown = rss_bytes() - before
print(("history: %d events listed, %d with values, %d bytes charged (budget %d); resident memory grew %d bytes")
      :format(h.events, h.kept, h.bytes, BUDGET, grown))
assert(h.bytes <= BUDGET, "the history's own count stays within its budget")
assert(h.bytes > BUDGET * 3 / 4, "the run filled the budget")
if os.getenv("TAPEDECK_TEST_SKIP_RSS") then   -- the sanitizer build: its shadow memory and quarantine are not ours
  print("resident memory bound skipped (TAPEDECK_TEST_SKIP_RSS)")
else
  assert(grown <= BUDGET * 1.25 + 4 * 1024 * 1024,
         ("resident memory grew %.1f MB for a %.0f MB budget"):format(grown / 2^20, BUDGET / 2^20))
end
check.equal(kept:numel(), 8, "the run's result")
dbg.history("off")
dbg.delete(id)
print("ok")
