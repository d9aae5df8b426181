-- loop_script.lua: a loop of small tensor ops, for line breakpoints with conditions and hit counts,
-- for pause, and for a client that leaves while the program runs (tests/dap/).
--   tapedeck loop_script.lua [N]     N iterations (default 5); prints the sum of 1..N
local n = tonumber(arg[1]) or 5
local total = 0
for i = 1, n do
  local t = torch.ones(2, 2) * i
  total = total + t:sum():item() / 4
end
print("total", total)
