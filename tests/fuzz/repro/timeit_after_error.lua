-- f:timeit() after a call of f that raised an error: timeit reruns "the last call's arguments",
-- which did not fit the plan (here: none), and Snapshot::take indexes the inputs vector past its
-- end (lua_plan.cpp:491, inputs[t.index]): UBSan "reference binding to null pointer"; release segfaults.
local x = torch.ones(2, {requires_grad = true})
local f = torch.freeze(function(x) local l = (x * 2):sum(); l:backward(); return l end, x)
print(pcall(f))          -- no argument: an error
print(pcall(f.timeit, f, 1))
