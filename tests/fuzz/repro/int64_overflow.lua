-- int64 arithmetic that overflows: signed overflow (UB) in the int kernels (kernels_cpu.cpp
-- inplace_loop of mul_/sub_, and out-of-place ones). PyTorch wraps around; here UBSan stops.
local x = torch.full({2}, -2^63, {dtype = "int64"})
torch.no_grad(function() x:mul_(2) end)
print(x)
