-- freeze's guards: a frozen function never runs stale control flow. A value the Lua code read
-- while recording (item, totable, a comparison) or an input's shape that differs makes it
-- re-record (default) or refuse (strict), naming the guard and its line.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

local function branchy(x)
  local s = x:sum()
  if s > 0 then        -- a comparison: its truth is a guard
    return x * 2
  else
    return x * -3
  end
end
local branch_line = 8

local pos, neg = torch.tensor({1, 2}), torch.tensor({-1, -2})
local f = torch.freeze{branchy, pos, verbose = false}
check.close(f(pos), {2, 4}, 0, "same branch")
check.close(f(torch.tensor({3, 1})), {6, 2}, 0, "same branch, other data: replayed")
check.equal(f:stats().records, 1, "no re-record while the branch holds")
-- The other branch: re-recorded, the eager answer, and the reason kept.
check.close(f(neg), {3, 6}, 0, "other branch: re-recorded")
check.equal(f:stats().records, 2)
local reason = f:stats().last_reason
assert(reason:find("was true", 1, true) and reason:find("test_freeze_guards.lua:" .. branch_line, 1, true), reason)
-- Both plans are cached now: either branch replays without recording.
check.close(f(pos), {2, 4}, 0)
check.close(f(neg), {3, 6}, 0)
check.equal(f:stats().records, 2, "both branches cached")

-- Strict mode refuses, naming the guard and the line.
local s = torch.freeze{branchy, pos, strict = true}
local ok, message = pcall(s, neg)
assert(not ok, "strict mode must refuse the other branch")
assert(message:find("guard failed", 1, true) and message:find("s > 0 was true", 1, true) and
       message:find("test_freeze_guards.lua:" .. branch_line, 1, true) and message:find("strict mode", 1, true), message)
-- A shape change: re-recorded by default, refused in strict mode naming the input and shape.
local g = torch.freeze{function(x) return x:sum() end, torch.ones(2, 3), verbose = false}
check.close(g(torch.ones(4, 3)), 12, 0, "new shape: re-recorded")
check.equal(g:stats().records, 2)
local gs = torch.freeze{function(x) return x:sum() end, torch.ones(2, 3), strict = true}
ok, message = pcall(gs, torch.ones(4, 3))
assert(not ok and message:find("input 1 (x) has shape [4,3]; the plan expects [2,3]", 1, true), message)

-- item(): a guard on the exact value (a loop count decided by data).
local function loop(x)
  local n = x:sum():item()
  local y = x
  for _ = 1, n do y = y * 2 end
  return y
end
local l = torch.freeze{loop, torch.tensor({1, 1}), verbose = false}
check.close(l(torch.tensor({1, 1})), {4, 4}, 0)
check.close(l(torch.tensor({2, 1})), {16, 8}, 0, "a different count: re-recorded")
check.equal(l:stats().records, 2)
local ls = torch.freeze{loop, torch.tensor({1, 1}), strict = true}
ok, message = pcall(ls, torch.tensor({2, 1}))
assert(not ok and message:find("x:sum():item() read 2 (", 1, true) and message:find("test_freeze_guards.lua:47)", 1, true), message)

-- Guards are said as the code wrote them: `b:norm() > 1000` (Lua calls it 1000 < b:norm()), not
-- node ids; a line with several comparisons is quoted whole beside the one that failed.
local big = torch.freeze{function(b)
  if b:norm() > 1000 then return b * 0 end
  return b
end, torch.ones(2), strict = true}
ok, message = pcall(big, torch.ones(2) * 1000)
assert(not ok and message:find("guard failed: b:norm() > 1000 was false (", 1, true) and message:find("test_freeze_guards.lua:63)", 1, true), message)
local both = torch.freeze{function(b)
  if 3 < b:sum() and b:max() > 0 then return b end
  return -b
end, torch.ones(2) * 5, strict = true}
ok, message = pcall(both, -torch.ones(2))
assert(not ok and message:find("> 3 in `if 3 < b:sum() and b:max() > 0 then return b end` was true (", 1, true) and message:find("test_freeze_guards.lua:69)", 1, true),
       message)

-- totable(): every value is guarded.
local t = torch.freeze{function(x) local v = x:totable(); return x * v[1] end, torch.tensor({2, 5}), strict = true}
check.close(t(torch.tensor({2, 5})), {4, 10}, 0)
ok, message = pcall(t, torch.tensor({3, 5}))
assert(not ok and message:find("totable() read {2, 5}", 1, true), message)

-- The .grad state is a guard too: `if w.grad then` decided by it.
local w = torch.ones(2, {requires_grad = true})
local function maybe_clear(x)
  if w.grad then w.grad:zero_() end
  local loss = (w * x):sum()
  loss:backward()
  return loss
end
maybe_clear(torch.ones(2))   -- eagerly once: w.grad exists from now on
local m = torch.freeze{maybe_clear, torch.ones(2), strict = true}
check.close(w.grad, {1, 1}, 0)
m(torch.ones(2) * 3)
check.close(w.grad, {3, 3}, 0, "zeroed then accumulated")
w.grad = nil
ok, message = pcall(m, torch.ones(2))
assert(not ok and message:find("w.grad was a tensor when recorded", 1, true) and message:find("now it is nil", 1, true), message)

-- Non-tensor arguments are guarded by value.
local scale = torch.freeze{function(x, k) return x * k end, torch.ones(2), 3, verbose = false}
check.close(scale(torch.ones(2), 3), {3, 3}, 0)
check.close(scale(torch.ones(2), 5), {5, 5}, 0, "another number: re-recorded")
check.equal(scale:stats().records, 2)

-- Autograd mode is part of the plan.
local am = torch.freeze{function(x) return x * 2 end, torch.ones(1), strict = true}
ok, message = pcall(function() return torch.no_grad(function() return am(torch.ones(1)) end) end)
assert(not ok and message:find("autograd is off", 1, true), message)

-- The cache is bounded: the least recently used plan goes.
local c = torch.freeze{function(x) return x + 1 end, torch.ones(1), cache = 2, verbose = false}
c(torch.ones(2)); c(torch.ones(3)); c(torch.ones(1))
check.equal(c:stats().cached, 2, "cache bounded")
check.equal(c:stats().records, 4, "the evicted shape was recorded again")

-- Things a plan cannot replay are refused when freezing, clearly.
local p = torch.ones(2, {requires_grad = true})
ok, message = pcall(torch.freeze, function(x) p.grad = x; return x end, torch.ones(2))
assert(not ok and message:find("assigns a tensor to .grad", 1, true), message)
local inner = torch.freeze(function(x) return x + 1 end, torch.ones(1))
ok, message = pcall(torch.freeze, function(x) return inner(x) end, torch.ones(1))
assert(not ok and message:find("cannot run while another function is being frozen", 1, true), message)

print("test_freeze_guards: ok")
