-- reshape/view with sizes whose product overflows int64: signed overflow (UB) in resolve_reshape
-- (engine/core/ops.cpp `known *= s.dims[i]`). Expected: an error naming reshape.
local ok, e = pcall(function() return torch.ones(12):reshape(1, 12, 2^32, 2^33) end)
print(ok, e)
