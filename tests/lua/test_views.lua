-- Views share their base's storage: a write through any of them shows in the base (and the other
-- way round), as in PyTorch. Writes autograd must see are recorded on the base; the gradients are
-- checked against PyTorch in test_oracle.lua (rows "rnn outputs[t] = h", "in place through views").
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

local function base() return torch.tensor({{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}}) end

-- Each view op: a write through the view shows in the base.
local x = base()
x:narrow(1, 1, 2):fill_(0)
check.close(x, {{0, 0, 0, 0}, {0, 0, 0, 0}, {9, 10, 11, 12}}, 0, "narrow writes the base")
x = base(); x[1]:fill_(1)
check.close(x[1], {1, 1, 1, 1}, 0, "x[1] is a view")
check.close(x[2], {5, 6, 7, 8}, 0, "the other rows are untouched")
x = base(); x:select(2, 3):zero_()
check.close(x, {{1, 2, 0, 4}, {5, 6, 0, 8}, {9, 10, 0, 12}}, 0, "select along dim 2")
x = base(); x:t()[1]:fill_(-1)
check.close(x, {{-1, 2, 3, 4}, {-1, 6, 7, 8}, {-1, 10, 11, 12}}, 0, "t() is a view: its first row is x's first column")
x = base(); x:transpose(1, 2):mul_(2)
check.close(x, {{2, 4, 6, 8}, {10, 12, 14, 16}, {18, 20, 22, 24}}, 0, "transpose, in place on the whole view")
x = torch.arange(24):reshape(2, 3, 4); x:permute(3, 1, 2)[2]:fill_(-7)
check.equal(x[{1, 1, 2}]:item(), -7, "permute"); check.equal(x[{2, 3, 2}]:item(), -7, "permute")
check.equal(x[{1, 1, 1}]:item(), 0, "permute leaves the others")
x = base(); x:view(12):narrow(1, 5, 2):fill_(0)
check.close(x[2], {0, 0, 7, 8}, 0, "view")
x = base(); x:reshape(2, 6)[2]:fill_(0)
check.close(x[3], {0, 0, 0, 0}, 0, "reshape of a contiguous tensor is a view")
x = base(); x:unsqueeze(1)[1]:squeeze():add_(100)
check.close(x[3], {109, 110, 111, 112}, 0, "unsqueeze and squeeze")
x = base(); x[{2, {2, 3}}] = 0
check.close(x[2], {5, 0, 0, 8}, 0, "t[{i, {a, b}}] = 0")
x = base(); x[{{}, {1, -1, 2}}] = torch.tensor({{-1, -2}})
check.close(x, {{-1, 2, -2, 4}, {-1, 6, -2, 8}, {-1, 10, -2, 12}}, 0, "every other column, a broadcast tensor")
x = base(); x[2] = 9
check.close(x[2], {9, 9, 9, 9}, 0, "t[i] = number")
x = base(); x[{3, 4}] = 0.5
check.equal(x[{3, 4}]:item(), 0.5, "t[{i, j}] = number"); check.equal(x[{3, 4}]:dim(), 0, "t[{i, j}] is 0-d")
x = base(); local e = torch.tensor({1, 2}):view(2, 1):expand(2, 3)
check.close(e, {{1, 1, 1}, {2, 2, 2}}, 0, "expand repeats without copying")
check.equal(e:stride(2), 0, "an expanded dim has stride 0")
check.fails("fill_", "repeats elements", function() e:fill_(1) end)

-- The base's writes show in the views too, and the other way round.
x = base(); local row = x[2]
x:add_(1)
check.close(row, {6, 7, 8, 9}, 0, "a view sees the base's in-place writes")

-- Layout: stride, is_contiguous, contiguous, storage_offset.
x = base()
check.equal(x:is_contiguous(), true); check.equal(x:t():is_contiguous(), false)
check.equal(table.concat(x:t():stride(), ","), "1,4", "t()'s strides")
check.equal(x[3]:storage_offset(), 8, "x[3] starts 8 elements in")
local packed = x:t():contiguous()
check.equal(packed:is_contiguous(), true); check.close(packed, x:t(), 0, "contiguous keeps the values")
packed:fill_(0); check.equal(x[{1, 1}]:item(), 1, "contiguous() of a view is a copy")
check.equal(x:contiguous() == x, true, "contiguous() of a contiguous tensor is the tensor itself")
check.fails("view", "use reshape", function() return x:t():view(12) end)
check.close(x:t():reshape(12), {1, 5, 9, 2, 6, 10, 3, 7, 11, 4, 8, 12}, 0, "reshape copies when it must")

-- Autograd: a write through a view of a leaf that requires grad is refused (as PyTorch).
local w = torch.ones(2, 2, {requires_grad = true})
check.fails("x[i] = value", "a view of tensor #", function() w[1] = 5 end)
check.fails("fill_", "a view of tensor #", function() w[1]:fill_(5) end)
torch.no_grad(function() w[1]:fill_(5) end)
check.close(w, {{5, 5}, {1, 1}}, 0, "under no_grad the write goes through")

-- A view taken before a write that autograd recorded on the base is out of date: refused, not wrong
-- (PyTorch would recompute its history; here it is taken again).
local h = torch.ones(3, {requires_grad = true}) * 2
local buffer = torch.zeros(2, 3)
local stale = buffer[2]
buffer[2] = h
check.close(stale, {2, 2, 2}, 0, "the old view reads the storage")
local fresh = buffer[2]   -- taken after the write: current
check.close(fresh * 1, {2, 2, 2}, 0, "a view taken after the write is current")
check.fails("mul", "history is out of date", function() return stale * h end)
torch.no_grad(function() check.close(stale * 1, {2, 2, 2}, 0, "without autograd it reads as any view") end)

-- outputs[t] = h in an RNN-style loop: the gradient reaches every step (values: test_oracle).
local W = torch.tensor({{0.5, -0.25}, {0.1, 0.3}}, {requires_grad = true})
local outputs = torch.zeros(4, 2)
local state = torch.ones(2)
for t = 1, 4 do
  state = W:mm(state:view(2, 1)):view(2):tanh()
  outputs[t] = state
end
outputs:sum():backward()
check.equal(W.grad ~= nil, true, "W got a gradient through outputs[t] = h")
check.equal(outputs.requires_grad, true, "the buffer is part of the graph after the writes")

-- torch.equal / torch.allclose (== on tensors compares handles: Lua's == must return a boolean)
check.equal(torch.equal(base(), base()), true); check.equal(torch.equal(base(), base():t():t()), true)
check.equal(torch.equal(base(), torch.zeros(3, 4)), false)
check.equal(torch.allclose(torch.tensor({1, 2}), torch.tensor({1, 2 + 1e-7})), true)
check.equal(torch.allclose(torch.tensor({1, 2}), torch.tensor({1, 2.1}), {atol = 0.05}), false)
check.equal(torch.allclose(torch.tensor({1, 2}), torch.tensor({1, 2.1}), {atol = 0.2}), true)
check.fails("torch.allclose", "unknown option 'tol'", function() torch.allclose(base(), base(), {tol = 1}) end)

-- Bad indices say what is wrong.
check.fails("index", "out of range for dim 1 of size 3", function() return base()[4] end)
check.fails("index", "too many indices", function() return base()[{1, 1, 1}] end)
check.fails("x[i] = value", "out of range for dim 2 of size 4", function() local y = base(); y[{1, 5}] = 0 end)
check.fails("index", "step must be positive", function() return base()[{{1, 3, 0}}] end)

-- freeze: views and writes through them replay as eager.
local function step(a, b)
  local out = torch.zeros(3, 4)
  out[1] = a[2]
  out[{{2, 3}}] = a:narrow(1, 1, 2) * b:t()[1]
  out:t()[4]:fill_(-1)
  return out:permute(2, 1):contiguous()
end
local a, b = base(), torch.tensor({{1}, {2}, {3}, {4}})
local f = torch.freeze(step, a, b)
for _ = 1, 2 do
  local a2, b2 = torch.randn(3, 4), torch.randn(4, 1)
  check.close(f(a2, b2), step(a2, b2), 0, "frozen views replay as eager")
end
-- ... also with the debugger watching (a breakpoint set: the plan runs its steps as nodes, and a
-- view's slot takes the layout its node's kernel set)
do
  local watching = dbg.break_on{op = "tanh"}
  local a2, b2 = torch.randn(3, 4), torch.randn(4, 1)
  check.close(f(a2, b2), step(a2, b2), 0, "frozen views replay as eager under an observer")
  dbg.delete(watching)
end
-- Tensor keys: an int64 index selects along dim 1 (a copy), a mask picks elements (masked_select).
x = base()
check.close(x[torch.tensor({3, 1}, {dtype = "int64"})], {{9, 10, 11, 12}, {1, 2, 3, 4}}, 0, "t[index]")
check.close(x[x:gt(9)], {10, 11, 12}, 0, "t[mask]")
check.close(x[torch.tensor({0, 1, 0, 1}):view(1, 4)], {2, 4, 6, 8, 10, 12}, 0, "a mask broadcasts")
x[torch.tensor({2}, {dtype = "int64"})] = 0
check.close(x[2], {0, 0, 0, 0}, 0, "t[index] = number")
check.fails("index", "index 4 out of range", function() return base()[torch.tensor({4}, {dtype = "int64"})] end)
-- in a frozen function a mask's values decide the result's size: they are a guard
local pick = torch.freeze(function(a) return a[a:gt(0)] * 2 end, torch.tensor({1, -1, 1}))
check.close(pick(torch.tensor({5, -2, 3})), {10, 6}, 0, "the same mask: replayed")
check.close(pick(torch.tensor({5, 2, 3})), {10, 4, 6}, 0, "another mask: the guard fails, the function is recorded again")
-- Host reads of views: printing, totable, .npy files, and frozen functions that capture a view,
-- take a view as input, and are saved and loaded.
local ints = torch.arange(6):reshape(2, 3)
check.equal(tostring(ints:t()):find("[0, 3]", 1, true) ~= nil, true, "int64 views print their own elements")
local rows = ints:t():totable()
check.equal(rows[1][2], 3); check.equal(rows[3][1], 2)
local npy = os.tmpname()
torch.save_npy(ints:t(), npy)
check.equal(torch.equal(torch.load_npy(npy), ints:t()), true, "a view saved as .npy holds its own elements")
os.remove(npy)
local Wt = torch.randn(2, 3):t()
local times = torch.freeze(function(m) return m:mm(Wt) end, torch.ones(3, 4):t())
local m = torch.randn(3, 4):t()
check.close(times(m), m:mm(Wt), 1e-6, "a captured view and a view input, replayed")
check.close(times(m:contiguous()), m:mm(Wt), 1e-6, "another layout of the input: recorded again")
local plan_path = os.tmpname()
torch.save_plan(times, plan_path)
local loaded = torch.load_plan(plan_path)
check.close(loaded(m:contiguous()), m:mm(Wt), 1e-6, "the saved plan holds the captured view's elements")
local ok_view, view_error = pcall(loaded, m)
check.equal(ok_view, false, "a loaded plan does not re-record: another layout is an error")
check.equal(view_error:find("is a strided view; the plan was recorded with a contiguous tensor", 1, true) ~= nil, true, view_error)
os.remove(plan_path)
print("views ok")
