-- The rewind history (engine/core/history.h, docs/debugger.md "Rewind") on the 500-step RNN with its
-- backward pass: the bytes it holds stay within its budget at every stop, the tensor memory of the
-- run with the history stays within the run's own peak plus the budget, the oldest events' values
-- fall out (and :back to one says so), and rewinding still shows the values kept as they were.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

local STEPS = 500

-- The issue's RNN unroll (scripts/rnn_unrolled.lua), forward and backward.
local function run_rnn()
  torch.manual_seed(0)
  local W_h = (torch.randn(20, 20) * 0.1):requires_grad_(true)
  local W_x = torch.randn(20, 10, {requires_grad = true})
  local xs = torch.randn(STEPS, 10)
  local h = torch.zeros(1, 20)
  for t = 1, STEPS do
    local x = xs:narrow(1, t, 1)
    h = (torch.mm(W_h, h:t()) + torch.mm(W_x, x:t())):tanh():t()
  end
  local loss = h:sum()
  loss:backward()
  return loss
end

-- A stop at every tanh group of the backward pass: the history's numbers at each.
local samples = {}
local last_stop_text
local rewind_at_last = false   -- run 2 rewinds at its last stop
local id = dbg.break_on{op = "tanh", phase = "bwd", action = function(stop)
  local h = dbg.history()
  samples[#samples + 1] = h
  if rewind_at_last and #samples == STEPS then   -- the last stop (step 1's tanh, near the end of backward): rewind
    dbg.command(":back 1")
    assert(dbg.history().rewound_to == h.newest - 1, "moved one event back")
    local back = dbg.stopped()
    assert(back.stop.kind == "rewound", "the names are the rewound event's")
    dbg.command(":back " .. (h.newest - h.oldest - 1))   -- to the oldest event listed
    last_stop_text = dbg.banner()
    dbg.command(":forward " .. (h.newest - h.oldest))
  end
end}

-- 1. The run without the history: its own peak of tensor memory.
dbg.history("off")
collectgarbage(); collectgarbage()
local base_live = torch.memory()
torch.reset_peak_memory()
run_rnn()
local _, _, peak_off = torch.memory()
check.equal(#samples, STEPS, "the breakpoint stopped at every step's tanh")
check.equal(samples[1].events, 0, "no history while it is off")
samples = {}
collectgarbage(); collectgarbage()

-- 2. The same run with a budget far below what the run makes.
local BUDGET = 256 * 1024
dbg.history("256KB")
torch.reset_peak_memory()
rewind_at_last = true
run_rnn()
rewind_at_last = false
local _, _, peak_on = torch.memory()
check.equal(#samples, STEPS, "every stop with the history on")
local most = 0
for _, h in ipairs(samples) do
  assert(h.bytes <= BUDGET, ("the history holds %d bytes, over its budget of %d"):format(h.bytes, BUDGET))
  most = math.max(most, h.bytes)
end
local final = samples[#samples]
print(("500-step RNN: %d events listed, %d with values, held %d bytes at most (budget %d); tensor peak %d bytes "
       .. "without the history, %d with it"):format(final.events, final.kept, most, BUDGET, peak_off - base_live, peak_on - base_live))
assert(final.events > 100, "forward ops and backward groups are events (as many as the budget holds)")
assert(final.kept < final.events and final.oldest_kept > final.oldest, "the oldest events' values fell out")
assert(most > BUDGET / 2, "the history used its budget")
assert(peak_on <= peak_off + BUDGET, ("tensor memory %d with the history, %d without: over the budget %d"):format(
  peak_on, peak_off, BUDGET))
assert(last_stop_text and last_stop_text:find("fell out of the history %(budget 256 KB%)"), last_stop_text)

-- 3. With the default budget the whole run is kept.
samples = {}
dbg.history("off")   -- forgets run 2's events
dbg.history("256MB")
run_rnn()
local h = samples[#samples]
check.equal(h.kept, h.events, "everything kept within 256 MB")
dbg.delete(id)
dbg.history("off")
check.equal(dbg.history().events, 0, "off lets everything go")
print("ok")
