-- Hostile calls get a clear error naming the function and this script's line, never a crash, a
-- hang or a wrong result: sizes that overflow, ranges at the integer limits, empty dims, the
-- collector running while the engine walks its nodes, frozen functions after a failed call.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

-- Sizes whose element count (or byte count) overflows 64 bits are refused where shapes are made.
check.fails("zeros", "overflows", function() return torch.zeros(2 ^ 32, 2 ^ 32) end)
check.fails("zeros", "overflows", function() return torch.zeros(2, math.maxinteger) end)
check.fails("ones", "overflows", function() return torch.ones({math.maxinteger, 3}) end)
check.fails("eye", "overflows", function() return torch.eye(math.maxinteger) end)
check.fails("eye", "overflows", function() return torch.eye(2 ^ 32) end)
check.fails("expand", "negative size -2", function() return torch.zeros(1, 1):expand(2, -2) end)
check.fails("reshape", "negative", function() return torch.zeros(4):reshape(-2, -2) end)

-- What fits in 64 bits but not in memory is refused before anything is allocated, in GB.
local message = check.fails("eye", "GB", function() return torch.eye(2 ^ 29) end)
assert(message:find("memory limit", 1, true), message)
message = check.fails("zeros", "GB", function() return torch.zeros(2 ^ 20, 2 ^ 20) end)
assert(message:find("4096 GB asked for", 1, true), message)
check.fails("mm", "GB", function() return torch.zeros(2 ^ 20, 0):mm(torch.zeros(0, 2 ^ 20)) end)

-- narrow: start and length at the integer limits are range errors, not wrapped arithmetic.
local x = torch.tensor({{1, 2, 3}, {4, 5, 6}})
check.fails("narrow", "out of range", function() return x:narrow(2, 2, math.maxinteger) end)
check.fails("narrow", "out of range", function() return x:narrow(2, math.maxinteger, 1) end)
check.fails("narrow", "out of range", function() return x:narrow(2, math.mininteger, 1) end)
check.fails("narrow", "out of range", function() return x:narrow(2, 0, 1) end)
check.fails("narrow", "out of range", function() return x:narrow(2, 2, -1) end)
check.close(x:narrow(2, -1, 1), {{3}, {6}}, 0, "narrow from the end")   -- -1 is the last, as PyTorch
check.close(x:narrow(2, 2, 2), {{2, 3}, {5, 6}}, 0, "narrow")
check.shape(x:narrow(2, 4, 0), {2, 0}, "narrow of length 0 at the end")

-- softmax and log_softmax along an empty dim give an empty result (PyTorch too), reading nothing.
check.shape(torch.zeros(0, 1000, 1000):softmax(1), {0, 1000, 1000}, "softmax along an empty dim")
check.shape(torch.zeros(3, 0, 2):log_softmax(2), {3, 0, 2}, "log_softmax along an empty dim")
check.shape(torch.zeros(3, 0):softmax(-1), {3, 0}, "softmax of rows of no element")

-- torch.tape() and torch.graph() build Lua tables while the collector runs: the nodes only a
-- garbage tensor held must stay readable until the list is built.
collectgarbage("incremental", 100, 400)
local w = torch.randn(4, 4, {requires_grad = true})
for round = 1, 30 do
  local keep
  for i = 1, 50 do
    local garbage = torch.randn(4) * 2 + i   -- data nodes nothing else holds
    if i == 25 then keep = (w * garbage):sum() end
  end
  for _, record in ipairs(torch.tape()) do assert(record.id and record.op and record.where, "a tape record is whole") end
  for _, record in ipairs(torch.graph(keep)) do assert(record.id and record.op, "a graph record is whole") end
end
collectgarbage("incremental", 200, 100)

-- A tensor Lua has finalised (seen again from another object's finaliser) is an error, not a crash.
local finaliser_message
do
  local box = setmetatable({}, {__gc = function(self)
    local ok, why = pcall(function() return self.t + 1 end)
    finaliser_message = ok and "no error" or why
  end})
  box.t = torch.ones(2)   -- made after the box: finalised before it
end
collectgarbage()
collectgarbage()
assert(finaliser_message and finaliser_message:find("add: expects tensors or numbers, got a tensor already finalised", 1, true),
       tostring(finaliser_message))
check.equal(getmetatable(torch.ones(1)), "tapedeck.Tensor", "getmetatable of a tensor")

-- A frozen function whose latest call failed: timeit uses the last call that succeeded.
local a = torch.randn(2, 2, {requires_grad = true})
local f = torch.freeze(function(v) local l = v:mm(v):sum(); l:backward(); return l end, a)
f.verbose = false
assert(not pcall(f, 5), "calling with a number fails (the function indexes it)")
local timing = f:timeit(2)
assert(timing.max_diff == 0, "timeit after a failed call compares the last good call")
check.fails("timeit", "iterations", function() return f:timeit(0) end)
check.fails("timeit", "iterations", function() return f:timeit("many") end)

-- freeze: the function's own error comes back as it was raised, without a traceback inside it.
local ok, why = pcall(torch.freeze, function() error("boom") end, torch.ones(1))
assert(not ok and why:find("boom", 1, true) and not why:find("stack traceback", 1, true), why)
check.fails("freeze", "cache must be", function() return torch.freeze{function(v) return v end, torch.ones(1), cache = {}} end)
check.fails("torch.freeze", "unknown option 'strictt'", function() return torch.freeze{function(v) return v end, strictt = true} end)
check.fails("freeze", "expects a function", function() return torch.freeze(42) end)
check.fails("with_passes", "table", function() return f:with_passes(3) end)
check.fails("save_npy", "argument 2: path must be a string, got table", function() torch.save_npy(torch.ones(2), {}) end)
check.fails("load_plan", "argument 1: path must be a string", function() return torch.load_plan() end)

-- Assignments name what was written.
local y = torch.zeros(3)
check.fails("x[mask] = value", "value must be a number, got tensor", function() y[y:gt(0)] = torch.ones(3) end)
check.fails("add", "expects tensors or numbers", function() return y + {} end)

-- A watch that does not parse is refused when it is set, not at every stop.
ok, why = pcall(dbg.watch, "))(")
assert(not ok and why:find("dbg.watch", 1, true) and why:find("not a Lua expression", 1, true), why)


-- int64 tensors beside float numbers compute as PyTorch does (in float); conversions to int64
-- are defined for every float (NaN is 0, the rest saturates); int64 arithmetic wraps around.
local ints = torch.tensor({2, 3}, {dtype = "int64"})
check.equal((ints * 1.5).dtype, "float32", "int64 * a float number")
check.close(ints * 1.5, {3, 4.5}, 0, "int64 * 1.5")
check.equal((ints * 2).dtype, "int64", "int64 * an integer number")
check.close(ints:lt(2.5), {1, 0}, 0, "int64 < 2.5 compares in float")
check.close(ints + 1e308, {1 / 0, 1 / 0}, 0, "int64 + 1e308 is inf in float32, as in PyTorch")
local converted = torch.tensor({0 / 0, 1 / 0, -1 / 0, 1e30, -1e30, -2.7}, {dtype = "float64"}):long():totable()
check.equal(converted[1], 0, "NaN as int64")
check.equal(converted[2], math.maxinteger, "inf as int64")
check.equal(converted[3], math.mininteger, "-inf as int64")
check.equal(converted[4], math.maxinteger, "1e30 as int64")
check.equal(converted[5], math.mininteger, "-1e30 as int64")
check.equal(converted[6], -2, "-2.7 as int64 (toward zero)")
check.equal(torch.full({1}, 0 / 0, {dtype = "int64"}):item(), 0, "full of NaN as int64")
check.equal((torch.tensor({2 ^ 62}, {dtype = "int64"}) * 4):item(), 0, "int64 overflow wraps")
check.equal(torch.full({1}, math.mininteger, {dtype = "int64"}):neg():item(), math.mininteger, "-(int64 min) wraps")
check.equal(tostring(torch.tensor({1e30}):long()), "tensor([9223372036854775807], size=[1], dtype=int64)", "int64 printed exactly")

-- The memory limit is the user's to set: past it, creating a tensor is an error in GB.
local default_limit = torch.memory_limit()
assert(default_limit > 0, "a default memory limit")
torch.set_memory_limit(1 << 20)
local big = check.fails("randn", "4 MB asked for", function() return torch.randn(1024, 1024) end)
assert(big:find("of the 1 MB memory limit", 1, true), big)
local small = torch.randn(64, 64)   -- 16 KB fits
torch.set_memory_limit(nil)
check.equal(torch.memory_limit(), default_limit, "nil restores the default limit")
check.close(torch.randn(1024, 1024):numel(), 1024 * 1024, 0, "fits again")
check.fails("set_memory_limit", "negative", function() torch.set_memory_limit(-1) end)
check.fails("set_memory_limit", "nil restores the default", function() torch.set_memory_limit(0) end)
check.equal(torch.memory_limit(), default_limit, "a refused 0 changes nothing")

-- Strides that overflow 64 bits are refused as PyTorch refuses them (a size-0 dim counts as 1 in a
-- stride), whichever dim is 0; an empty tensor whose strides fit is made.
check.fails("zeros", "strides overflow", function() return torch.zeros(0, 1 << 40, 1 << 40) end)
check.fails("zeros", "element count overflows", function() return torch.zeros(1 << 40, 1 << 40, 0) end)
check.equal(torch.zeros(1 << 40, 0, 1 << 40):numel(), 0, "[2^40, 0, 2^40] is empty, as in PyTorch")

-- Argument errors name the function called and the caller's line, not "bad argument #1 to '?'".
check.fails("torch.Function", "takes a table", function() return torch.Function(5) end)
check.fails("torch.Function", "needs a backward function", function() return torch.Function{forward = function() end} end)
check.fails("dbg.break_on", "takes a table", function() return dbg.break_on(5) end)
check.fails("dbg.break_on", "phase must be", function() return dbg.break_on{op = "tanh", phase = "sideways"} end)
check.fails("viewer.plot", "name must be a string", function() return viewer.plot(nil, "x.png") end)
check.fails("viewer.plot", "no series 'nope'", function() return viewer.plot("nope", "x.png") end)
local ok_history, history_error = pcall(dbg.history, "17179869184GB")
assert(not ok_history and history_error:find("more than a budget can be", 1, true), tostring(history_error))

-- An empty result is not walked row by row, however large its other dims (these looped for
-- minutes, or for ever in the sanitizer build).
local started = os.clock()
check.shape(torch.randn({1, 1, 0}):expand(2 ^ 32, 1, 4, 0), {2 ^ 32, 1, 4, 0}, "expand to an empty huge shape")
check.shape(torch.zeros(0, math.maxinteger):t():clone(), {math.maxinteger, 0}, "transpose of an empty huge tensor")
assert(os.clock() - started < 5, "empty results take no time")

-- torch.Function without a name is called "Function" (it said "table index is nil").
local Unnamed = torch.Function{forward = function(ctx, v) return v * 2 end, backward = function(ctx, g) return g * 2 end}
check.equal(Unnamed.name, "Function", "the default name")
check.close(Unnamed(torch.ones(2)), {2, 2}, 0, "an unnamed function runs")

-- dbg.run names itself for a file it cannot load.
ok, why = pcall(dbg.run, "/nonexistent/script.lua")
assert(not ok and why:find("dbg.run: cannot open /nonexistent/script.lua", 1, true), why)

-- A frozen function's fields take what they say, and name themselves otherwise.
check.fails("frozen function", "cache_size must be an integer", function() f.cache_size = true end)
-- timeit over empty tensors (their saved bytes are an empty vector).
local empty = torch.randn({2, 0}, {requires_grad = true})
local fe = torch.freeze(function(v) local l = (v * v):sum(); l:backward(); return l end, empty)
check.equal(fe:timeit(1).max_diff, 0, "timeit of a function of an empty tensor")
print("hardening: ok")
