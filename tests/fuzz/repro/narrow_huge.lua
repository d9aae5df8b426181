-- narrow with a start or length near the int64 limits: signed overflow (UB) in the bounds check
-- (the shape rule in engine/core/ops.cpp: `start + length`) and in the binding (l_narrow in lua_tensor_ops.cpp: `start - 1`).
local x = torch.ones(2, 4)
print(pcall(x.narrow, x, 2, 3, math.maxinteger))
print(pcall(x.narrow, x, 2, math.mininteger, 1))
