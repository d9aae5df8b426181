-- f:timeit() of a plan whose captured tensor or gradient has 0 elements: Snapshot::restore calls
-- memcpy(dst, nullptr, 0) (lua_plan.cpp: an empty std::vector's data() is null), UB that UBSan reports.
local x = torch.randn({2, 0}, {requires_grad = true})
local f = torch.freeze(function(x) local l = (x * x):sum(); l:backward(); return l end, x)
print(f:timeit(1))
