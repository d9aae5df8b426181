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
assert(not ok and message:find("SGD: lr must be a number >= 0, got nil", 1, true), message)
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

-- ============================================================================================
-- param_groups: a list of group tables with per-group options over the defaults; lr readable and
-- writable; add_param_group; zero_grad drops gradients (set_to_none) or zeroes them.
local w = torch.ones(2, {requires_grad = true, dtype = "float64"})
local u = torch.ones(3, {requires_grad = true, dtype = "float64"})
local grouped = optim.SGD({{params = {w}, lr = 0.5}, {params = {u}}}, {lr = 0.1, momentum = 0.9})
check.equal(#grouped.param_groups, 2, "two groups")
check.equal(grouped.param_groups[1].lr, 0.5, "group 1 lr")
check.equal(grouped.param_groups[2].lr, 0.1, "group 2 lr falls back to the default")
check.equal(grouped.param_groups[2].momentum, 0.9, "group 2 momentum from the defaults")
check.equal(grouped.param_groups[1].params[1], w, "group 1 params")
grouped.param_groups[2].lr = 0.25
check.equal(grouped.param_groups[2].lr, 0.25, "lr written")
w:sum():backward()
u:sum():backward()
grouped:step()
check.close(w, {0.5, 0.5}, 1e-15)            -- 1 - 0.5 * 1
check.close(u, {0.75, 0.75, 0.75}, 1e-15)    -- 1 - 0.25 * 1
grouped:zero_grad({set_to_none = false})
check.close(w.grad, {0, 0})
grouped:zero_grad()
check.equal(w.grad, nil, "zero_grad sets to none")
local extra = torch.ones(1, {requires_grad = true, dtype = "float64"})
grouped:add_param_group{params = {extra}, lr = 1}
check.equal(#grouped.param_groups, 3, "add_param_group")
check.equal(grouped.param_groups[3].momentum, 0.9, "added group's momentum from the defaults")
extra:sum():backward()
grouped:step()
check.close(extra, {0}, 1e-15)
local keys = {}
for key in pairs(grouped.param_groups[1]) do keys[#keys + 1] = key end
table.sort(keys)
check.equal(table.concat(keys, ","), "dampening,lr,maximize,momentum,nesterov,params,weight_decay", "pairs(group)")

-- ============================================================================================
-- state_dict: PyTorch's shape (0-based parameter indices across groups), copies of the state;
-- load_state_dict restores it into another optimizer, which then steps exactly like the first.
local function adam_problem()
  local a1 = torch.tensor({1, -2}, {requires_grad = true, dtype = "float64"})
  local a2 = torch.tensor({{0.5, 3}}, {requires_grad = true, dtype = "float64"})
  local opt = optim.Adam({{params = {a1}, lr = 0.1}, {params = {a2}}}, {lr = 0.01, amsgrad = true})
  local function step()
    opt:zero_grad()
    local loss = (a1 * a1):sum() + (a2 * a2 * a2):sum()
    loss:backward()
    opt:step()
  end
  return opt, step, {a1, a2}
end
local opt1, step1, params1 = adam_problem()
step1(); step1()
local sd = opt1:state_dict()
check.equal(sd.param_groups[1].params[1], 0, "first parameter is index 0")
check.equal(sd.param_groups[2].params[1], 1, "second group's parameter is index 1")
check.equal(sd.param_groups[1].lr, 0.1, "group lr saved")
check.equal(sd.param_groups[2].amsgrad, true, "group options saved")
check.close(sd.state[0].step, 2)
check.shape(sd.state[1].exp_avg, {1, 2})
assert(sd.state[1].max_exp_avg_sq, "amsgrad's max_exp_avg_sq saved")
local opt2, step2, params2 = adam_problem()
for i = 1, 2 do torch.no_grad(function() params2[i]:copy_(params1[i]) end) end
opt2.param_groups[1].lr = 0.7
opt2:load_state_dict(sd)
check.equal(opt2.param_groups[1].lr, 0.1, "loading restores the group's lr")
step1(); step2()
for i = 1, 2 do check.close(params2[i], params1[i], 1e-15, "after load, the same step") end
-- state_dict holds copies: stepping on does not change a saved state_dict.
check.close(sd.state[0].step, 2)

-- Before any step there is no state (as PyTorch); Adagrad's exists from the start.
check.equal(next(optim.Adam({torch.ones(1, {requires_grad = true})}):state_dict().state), nil, "Adam: no state yet")
check.close(optim.Adagrad({torch.ones(1, {requires_grad = true})}, {initial_accumulator_value = 0.5}):state_dict().state[0].sum, {0.5})

-- ============================================================================================
-- Schedulers write every group's lr; get_last_lr lists them.
local sched_param = torch.ones(1, {requires_grad = true})
local sched_opt = optim.SGD({{params = {sched_param}, lr = 1}})
local step_lr = optim.lr_scheduler.StepLR(sched_opt, 2, {gamma = 0.5})
step_lr:step(); step_lr:step()
check.close(step_lr:get_last_lr(), {0.5}, 1e-15)
check.close(sched_opt.param_groups[1].lr, 0.5, 1e-15)
check.equal(sched_opt.param_groups[1].initial_lr, 1, "initial_lr kept in the group")

-- ============================================================================================
-- Errors name the optimizer and the user's line.
local q = torch.ones(2, {requires_grad = true})
local q2 = torch.ones(2, {requires_grad = true})
check.fails("SGD", "lr must be a number >= 0, got -1", function() optim.SGD({q}, {lr = -1}) end)
check.fails("Adam", "betas must be two numbers in [0, 1)", function() optim.Adam({q}, {betas = {0.9, 1.5}}) end)
check.fails("optim.Adam", "unknown option 'beta' (did you mean 'betas'?", function() optim.Adam({q}, {beta = {0.9, 0.99}}) end)
check.fails("optim.RMSprop", "unknown option 'centred' (did you mean 'centered'?", function() optim.RMSprop({q}, {centred = true}) end)
check.fails("AdamW", "eps must be a number >= 0", function() optim.AdamW({q}, {eps = -1e-8}) end)
check.fails("Adam", "parameter 1 is not a leaf", function() optim.Adam({q * 2}) end)
check.fails("SGD", "param group 2 has no params", function() optim.SGD({{params = {q}}, {lr = 0.1}}, {lr = 0.1}) end)
check.fails("SGD", "parameter 1 of param group 2 is already in param group 1", function() optim.SGD({{params = {q}}, {params = {q}}}, {lr = 1}) end)
check.fails("SGD", "parameters 1 and 2 are the same tensor", function() optim.SGD({q, q}, {lr = 1}) end)
check.fails("SGD", "nesterov needs momentum > 0 and dampening = 0", function() optim.SGD({q}, {lr = 1, nesterov = true}) end)
check.fails("Adagrad", "expects a list of parameters (model:parameters()), got 42", function() optim.Adagrad(42) end)
local checked = optim.Adam({q})
check.fails("Adam", "lr must be a number >= 0, got -0.5", function() checked.param_groups[1].lr = -0.5 end)
check.fails("optim.Adam", "unknown option 'lrr' (did you mean 'lr'?", function() checked.param_groups[1].lrr = 0.5 end)
check.fails("Adam", "parameter 1 of param group 2 is already in param group 1", function() checked:add_param_group{params = {q}} end)
check.fails("step", "call it on an optimizer", function() checked.step() end)
local two = optim.Adam({{params = {q}}, {params = {q2}}})
check.fails("Adam", "the state dict has 2 param groups, the optimizer has 1", function() checked:load_state_dict(two:state_dict()) end)
local bigger = optim.Adam({torch.ones(3, {requires_grad = true})})
bigger.param_groups[1].params[1]:sum():backward(); bigger:step()
local moved = optim.Adam({q})
check.fails("Adam", "state[0].exp_avg has shape [3], the parameter's state has shape [2]", function() moved:load_state_dict(bigger:state_dict()) end)
local sgd_sd = optim.SGD({torch.ones(3, {requires_grad = true})}, {lr = 1, momentum = 0.9})
sgd_sd.param_groups[1].params[1]:sum():backward(); sgd_sd:step()
local adam_3 = optim.Adam({torch.ones(3, {requires_grad = true})})
check.fails("Adam", "state[0] has 'momentum_buffer', which Adam with these options does not keep", function() adam_3:load_state_dict(sgd_sd:state_dict()) end)
local sched = optim.lr_scheduler
check.fails("StepLR", "step_size must be an integer >= 1, got 0", function() sched.StepLR(checked, 0) end)
check.fails("optim.lr_scheduler.StepLR", "unknown option 'gama' (did you mean 'gamma'?", function() sched.StepLR(checked, 2, {gama = 0.5}) end)
check.fails("CosineAnnealingLR", "expects an optimizer", function() sched.CosineAnnealingLR({}, 10) end)
check.fails("LambdaLR", "lr_lambda must be a function", function() sched.LambdaLR(checked, 0.5) end)

-- A scheduler resumes from its state_dict: with the optimizer's, the same lrs as a run that never
-- stopped (as PyTorch's scheduler.state_dict()).
do
  local function make()
    local o = optim.SGD({torch.zeros(2):requires_grad_()}, {lr = 0.1})
    return o, sched.CosineAnnealingLR(o, 10, {eta_min = 0.01})
  end
  local o1, s1 = make()
  for _ = 1, 4 do s1:step() end
  local saved_s, saved_o = s1:state_dict(), o1:state_dict()
  local o2, s2 = make()
  o2:load_state_dict(saved_o)
  s2:load_state_dict(saved_s)
  for _ = 1, 3 do s1:step(); s2:step() end
  check.close(s2:get_last_lr(), s1:get_last_lr(), 0, "resumed schedule")
  check.equal(s2.last_epoch, 7, "resumed epoch")
  saved_s.base_lrs[1] = 99
  check.equal(s1.base_lrs[1], 0.1, "state_dict is a copy")
  local o3 = optim.SGD({torch.zeros(1):requires_grad_()}, {lr = 1})
  local lambda = sched.LambdaLR(o3, function(epoch) return 0.5 ^ epoch end)
  lambda:step(); lambda:step()
  local sd = lambda:state_dict()
  check.equal(sd.lr_lambdas, nil, "LambdaLR's functions are not state")
  check.equal(sd.last_epoch, 2, "LambdaLR's epoch")
  local step_sd = sched.StepLR(optim.SGD({torch.zeros(1):requires_grad_()}, {lr = 1}), 2):state_dict()
  check.fails("CosineAnnealingLR", "'gamma', 'step_size' are not fields", function() s2:load_state_dict(step_sd) end)
  check.fails("StepLR", "expects a table from scheduler:state_dict()", function() sched.StepLR(o3, 2):load_state_dict(5) end)
end

print("test_optim: ok")
