-- long() / to("int64") of NaN, Inf or a value out of int64's range: UB in the cast (kernels_cpu.cpp cpu_to).
-- Expected: an error naming to/long (or a defined value, as PyTorch's INT64_MIN).
local ok, e = pcall(function() return torch.tensor({0/0, 1/0, 1e30}):long() end)
print(ok, e)
