-- loop_script.lua: a loop of tensor ops, for line breakpoints with conditions and hit counts, for
-- pause, and for a client that leaves while the program runs (tests/dap/).
--   tapedeck loop_script.lua [N [SIZE]]   N iterations (default 5) of a SIZE x SIZE product
--   (default 2); prints the sum of 1..N
local n, size = tonumber(arg[1]) or 5, tonumber(arg[2]) or 2
local total = 0
for i = 1, n do
  local t = torch.ones(size, size):mm(torch.ones(size, size)) * (i / size)
  total = total + t:sum():item() / (size * size)
end
print("total", total)
