-- transpose (t(), transpose, and the dtype conversions/linear that copy through it) of an empty
-- tensor with a huge other dim, e.g. [0, 2^63-1] (nn.Linear(math.maxinteger, 0) makes such a
-- weight): Eigen's transpose assignment loops over the 2^63-1 outer rows of zero elements. The
-- release build's optimizer drops the empty loop; the sanitizer build (-O1) hangs for ever.
-- Expected: numel() == 0 returns at once.
local w = torch.zeros(0, math.maxinteger)
print(pcall(function() return w:t():clone() end))
local m = nn.Linear(math.maxinteger, 0)
print(pcall(m, torch.randn(5, 3, 2, {dtype = "float64"})))
