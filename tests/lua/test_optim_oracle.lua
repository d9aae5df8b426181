-- optim against PyTorch: every optimizer with several option sets, param groups, lr changed by a
-- scheduler between steps, and the schedulers' lr sequences, compared to 1e-10 in float64 with
-- tests/oracle/optim_oracle_data.lua (made by tests/oracle/make_optim_oracle.py with PyTorch).
local here = arg[0]:match("^(.*[/\\])") or "./"
local check = dofile(here .. "check.lua")
local oracle = dofile(here .. "../oracle/optim_oracle_data.lua")

local TOL = 1e-10

local function lambda_factor(epoch) return 1.0 / (epoch + 1) end   -- make_optim_oracle.py's

local function make_scheduler(opt, spec)
  local name, options = spec[1], spec[2]
  if name == "LambdaLR" then return optim.lr_scheduler.LambdaLR(opt, lambda_factor) end
  if name == "StepLR" then return optim.lr_scheduler.StepLR(opt, options.step_size, {gamma = options.gamma}) end
  return optim.lr_scheduler.CosineAnnealingLR(opt, options.T_max, {eta_min = options.eta_min})
end

local function describe_case(case)
  local parts = {}
  for key, value in pairs(case.options) do
    parts[#parts + 1] = key .. "=" .. (type(value) == "table" and ("{" .. table.concat(value, ",") .. "}") or tostring(value))
  end
  table.sort(parts)
  return case.name .. "{" .. table.concat(parts, ", ") .. "}" .. (case.group_lrs and " groups" or "") ..
         (case.scheduler and (" " .. case.scheduler[1]) or "")
end

local function run_case(case)
  local what = describe_case(case)
  local params = {}
  for i, values in ipairs(oracle.initial) do
    params[i] = torch.tensor(values, {dtype = "float64"}):reshape(oracle.shapes[i]):requires_grad_()
  end
  local opt
  if case.group_lrs then
    opt = optim[case.name]({{params = {params[1]}, lr = case.group_lrs[1]}, {params = {params[2]}, lr = case.group_lrs[2]}},
                           case.options)
  else
    opt = optim[case.name](params, case.options)
  end
  local scheduler = case.scheduler and make_scheduler(opt, case.scheduler)
  for step, grads in ipairs(oracle.grads) do
    for i, p in ipairs(params) do
      p.grad = grads[i] and torch.tensor(grads[i], {dtype = "float64"}):reshape(oracle.shapes[i]) or nil
    end
    opt:step()
    if scheduler then scheduler:step() end
    for i, p in ipairs(params) do check.close(p, case.after[step][i], TOL, what .. " step " .. step .. " param " .. i) end
  end
  -- The state_dict's state: the same entries (0-based), keys and values as PyTorch's.
  local state = opt:state_dict().state
  for index, expected in pairs(case.state) do
    assert(state[index], what .. ": state_dict has no state[" .. index .. "]")
    for key, value in pairs(expected) do
      assert(state[index][key], what .. ": state[" .. index .. "] has no " .. key)
      check.close(state[index][key], value, TOL, what .. " state[" .. index .. "]." .. key)
    end
    for key in pairs(state[index]) do assert(expected[key], what .. ": state[" .. index .. "] has extra key " .. key) end
  end
  for index in pairs(state) do assert(case.state[index], what .. ": extra state[" .. index .. "]") end
end

for _, case in ipairs(oracle.cases) do run_case(case) end

for _, schedule in ipairs(oracle.schedules) do
  local params = {torch.zeros(2, {dtype = "float64", requires_grad = true}), torch.zeros(2, {dtype = "float64", requires_grad = true})}
  local opt = optim.SGD({{params = {params[1]}, lr = 0.1}, {params = {params[2]}, lr = 0.05}}, {lr = 0.1})
  local scheduler = make_scheduler(opt, schedule)
  check.close(scheduler:get_last_lr(), schedule.lrs[1], TOL, schedule[1] .. " epoch 0")
  for epoch = 1, 20 do
    opt:step()
    scheduler:step()
    check.close(scheduler:get_last_lr(), schedule.lrs[epoch + 1], TOL, schedule[1] .. " epoch " .. epoch)
    check.close({opt.param_groups[1].lr, opt.param_groups[2].lr}, schedule.lrs[epoch + 1], TOL, schedule[1] .. " group lr")
  end
end

print("test_optim_oracle: ok (" .. #oracle.cases .. " optimizer cases, " .. #oracle.schedules .. " schedules)")
