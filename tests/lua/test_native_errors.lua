-- torch.freeze{fn, x, native = true} where the compiler is not there (TAPEDECK_CXX names no file),
-- as a user runs it (a child tapedeck): one line on stderr names the compiler asked for, the frozen
-- function still returns eager's values (the interpreted plan), f:native() gives false and the same
-- reason, f:source() shows the C++ all the same, and nothing is written to the cache folder.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")
local tapedeck = arg[-1]

local script = os.tmpname()
local stderr_file = os.tmpname()
local cache_base = os.tmpname()
local cache = cache_base .. "_cache"   -- not made: with no compiler, the cache is never looked at
local file = assert(io.open(script, "w"))
file:write([[
local w = torch.tensor({{0.5, -1, 0.25}, {2, 0.75, -0.5}})
local function layer(x) return (x:mm(w) + 1):tanh():sum() end
local x = torch.tensor({{1, 2}, {3, -4}, {0.5, 0.125}})
local f = torch.freeze{layer, x, native = true}
local x2 = torch.tensor({{-1, 0.5}, {2, 1}, {0.25, -3}})
assert(f(x2):item() == layer(x2):item(), "the interpreted plan gives eager's value")
assert(f(x):item() == layer(x):item(), "again")
local stats = f:stats()
assert(stats.native == false, "f:stats().native is false")
assert(stats.replays == 2, "both calls replayed the plan")
local ok, why = f:native()
assert(ok == false, "f:native() gives false")
print("why: " .. tostring(why))
local source = f:source()
assert(source:find('extern "C" void td_segment_1', 1, true), "f:source() shows the segments")
assert(source:find("tanh", 1, true), "f:source() shows the step's math")
print("done")
]])
file:close()

local command = string.format("TAPEDECK_CXX=/nonexistent/c++ XDG_CACHE_HOME=%q %q %q 2>%q", cache, tapedeck, script, stderr_file)
local pipe = assert(io.popen(command))
local out = pipe:read("a")
local ok = pipe:close()
local err_file = assert(io.open(stderr_file))
local err = err_file:read("a")
err_file:close()
os.remove(script)
os.remove(stderr_file)
os.remove(cache_base)

local reason = "no C++ compiler at TAPEDECK_CXX=/nonexistent/c++ (not an executable file, nor one on PATH)"
check.equal(ok, true, "the script runs:\n" .. out .. err)
check.equal(out:find("done", 1, true) ~= nil, true, "the script ran to its end:\n" .. out)
check.equal(out:find("why: " .. reason, 1, true) ~= nil, true, "f:native() gives the reason:\n" .. out)
local lines = {}
for line in err:gmatch("[^\n]+") do lines[#lines + 1] = line end
check.equal(#lines, 1, "one line on stderr (said once, not again by f:native()):\n" .. err)
check.equal(lines[1]:find(": no native code, the interpreted plan runs: " .. reason, 1, true) ~= nil, true,
            "the line names the compiler and says the plan runs interpreted:\n" .. err)
check.equal(io.open(cache) == nil, true, "nothing written to the cache folder")

print("test_native_errors: ok")
