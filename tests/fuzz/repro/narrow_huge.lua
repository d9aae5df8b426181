-- narrow with a start or length near the int64 limits: signed overflow (UB) in the bounds check
-- (engine/ops.cpp:397 `start + length`) and in the binding (lua_tensor.cpp:592 `start - 1`).
local x = torch.ones(2, 4)
print(pcall(x.narrow, x, 2, 3, math.maxinteger))
print(pcall(x.narrow, x, 2, math.mininteger, 1))
