-- A breakpoint that stops at every backward node of a long chain: each stop's names (the table an
-- action or on_stop gets) look up the node's forward group with tape_find (engine/core/tape.cpp, from
-- push_new_names in repl/debugger/debugger_stop.cpp), a linear scan from the tape's tail past every backward
-- node made so far, so a backward pass with n stops costs O(n^2) (rule 13 of docs/design.md). Release:
-- 2000 stops 0.02 s, 4000 0.09 s, 8000 0.43 s, 16000 2.05 s. Usage: tapedeck this.lua [N]
-- Found as a 90 s "hang" of the sanitizer build on a 20,000-step chain (seed 7103).
local N = tonumber(arg and arg[1]) or 8000
local y = torch.rand({2}, {requires_grad = true})
for i = 1, N do y = y * 1.0001 end
local stops = 0
dbg.break_on{when = "absmax >= 0", phase = "bwd", action = function(stop) stops = stops + 1 end}   -- every backward node
local t0 = os.clock()
y:sum():backward()
print(string.format("%d stops in %.2f s", stops, os.clock() - t0))
