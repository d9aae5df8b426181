-- expand of an empty tensor to a shape with a huge dim: cpu_expand (kernels_cpu.cpp:803) walks
-- every row of the 0-element result with RowWalker::next: 2^34 rows here (about a minute), 2^63
-- with math.maxinteger (for ever). A hang in the release build too. Expected: at once (0 elements).
local x = torch.randn({1, 1, 0})
local t0 = os.clock()
local y = x:expand(2^32, 1, 4, 0)
print(y.shape, os.clock() - t0, "s")
print(pcall(x.expand, x, math.maxinteger, 1, 1, 0))
