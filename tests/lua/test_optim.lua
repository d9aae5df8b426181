-- optim: SGD (with momentum) and Adam steps against values worked out by hand on
-- loss = sum(p^2), whose gradient is 2p.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

local function run(optimizer_of, steps)
  local p = torch.tensor({1, 2}, {requires_grad = true, dtype = "float64"})
  local optimizer = optimizer_of({p})
  local values = {}
  for step = 1, steps do
    optimizer:zero_grad()
    p:pow(2):sum():backward()
    optimizer:step()
    values[step] = p:totable()
  end
  return values
end

-- SGD, lr 0.1, momentum 0.9. Step 1: g = [2,4], buf = g, p = [1,2] - 0.1 [2,4] = [0.8,1.6].
-- Step 2: g = [1.6,3.2], buf = 0.9 [2,4] + g = [3.4,6.8], p = [0.8,1.6] - 0.1 buf = [0.46,0.92].
local sgd = run(function(params) return optim.SGD(params, {lr = 0.1, momentum = 0.9}) end, 2)
check.close(sgd[1], {0.8, 1.6}, 1e-12)
check.close(sgd[2], {0.46, 0.92}, 1e-12)

-- Plain SGD: p = p - lr g, so p = 0.8 p per step.
local plain = run(function(params) return optim.SGD(params, {lr = 0.1}) end, 3)
check.close(plain[3], {0.512, 1.024}, 1e-12)

-- Nesterov and weight decay: step 1 with g' = g + 0.5 p = [2.5,5], buf = g', d = g' + 0.9 buf.
local nesterov = run(function(params)
  return optim.SGD(params, {lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.5})
end, 1)
check.close(nesterov[1], {1 - 0.1 * 2.5 * 1.9, 2 - 0.1 * 5 * 1.9}, 1e-12)

-- Adam, lr 0.1, betas (0.9, 0.999), eps 1e-8, worked out with plain numbers.
local function adam_by_hand(steps)
  local p, m, v = {1, 2}, {0, 0}, {0, 0}
  local out = {}
  for t = 1, steps do
    for i = 1, 2 do
      local g = 2 * p[i]
      m[i] = 0.9 * m[i] + 0.1 * g
      v[i] = 0.999 * v[i] + 0.001 * g * g
      local m_hat, v_hat = m[i] / (1 - 0.9 ^ t), v[i] / (1 - 0.999 ^ t)
      p[i] = p[i] - 0.1 * m_hat / (math.sqrt(v_hat) + 1e-8)
    end
    out[t] = {p[1], p[2]}
  end
  return out
end
local adam = run(function(params) return optim.Adam(params, {lr = 0.1}) end, 5)
local expected = adam_by_hand(5)
check.close(adam[1], {0.9, 1.9}, 1e-7)   -- Adam's first step moves each weight by lr
for t = 1, 5 do check.close(adam[t], expected[t], 1e-7) end

-- A module can be given instead of its parameter list; bad options are named.
local model = nn.Linear(2, 1)
assert(#optim.Adam(model).params == 2)
local ok, message = pcall(optim.SGD, model:parameters(), {lr = 0.1, momentun = 0.9})
assert(not ok and message:find("SGD: unknown option 'momentun'", 1, true), message)
ok, message = pcall(optim.SGD, model:parameters(), {})
assert(not ok and message:find("SGD: lr must be a number", 1, true), message)
ok, message = pcall(optim.Adam, {})
assert(not ok and message:find("Adam: expects a list of parameters", 1, true), message)

-- A parameter without a gradient is left alone.
local a = torch.ones(2, {requires_grad = true})
local b = torch.ones(2, {requires_grad = true})
local opt = optim.Adam({a, b}, {lr = 0.5})
a:sum():backward()
opt:step()
check.close(a, {0.5, 0.5})
check.close(b, {1, 1})

print("test_optim: ok")
