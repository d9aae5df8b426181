-- an int64 tensor times a scalar that int64 cannot hold: the scalar is cast to int64 in the kernel
-- (kernels_cpu.cpp span_mul_scalar: static_cast<T>(a.scalar)), UB for 1e308, NaN, Inf.
-- Expected: an error naming mul (or promotion to float, as PyTorch does).
local ok, e = pcall(function() return torch.ones(2, {dtype = "int64"}) * 1e308 end)
print(ok, e)
