-- torch.Function{forward = ..., backward = ...} without `name` fails with "table index is nil":
-- torch_function (lua_function.cpp) sets the default name "Function" but then registers the nil
-- that lua_getfield left on the stack (lua_pushvalue(L, -2) is the nil, not the name).
-- Documented: a missing name is the name "Function".
local ok, f = pcall(torch.Function, {forward = function(ctx, x) return x * 2 end,
                                     backward = function(ctx, g) return g * 2 end})
print(ok, f)
if ok then print(f.apply(torch.ones(2))) end
