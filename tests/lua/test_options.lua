-- Every function that takes an options table checks its keys, by one mechanism (lua_options.cpp):
-- an unknown key is an error naming the function as the user called it, the key and the keys it
-- takes. The test walks every function a script can reach (torch.*, torch.autograd/onnx/cuda.*,
-- x:*, F.*, nn.* constructors, optim.* and optim.lr_scheduler.* constructors, the registry's
-- methods) and calls each with valid positional arguments and a trailing {bogus_key = 1}:
--   * a function in the options registry (torch._options.registry()) must refuse it and list the
--     keys the registry holds for it ("it takes ...");
--   * any other must refuse it too ("takes no options"): a function that silently drops a table
--     is the hole this closes (torch.add(a, b, {alpha = 5}) returned a + b).
-- And the registry is complete: a Lua function of the library with a parameter named opts or
-- options is a function that reads options, so its name must be registered.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

local registry = torch._options.registry()
local THIS_FILE = arg[0]:match("[^/\\]+$")
local BOGUS = {bogus_key = 1}

local x = torch.rand(2, 3)
local sq = torch.rand(3, 3)
local idx = torch.tensor({1, 2}, {dtype = torch.int64})
local model = nn.Linear(3, 2)
local opt = optim.SGD(model:parameters(), {lr = 0.1})
local mha = nn.MultiheadAttention(4, 2)
local frozen = torch.freeze(function(v) return v * 2 end, torch.ones(2))

-- Positional arguments that get each function past its own checks to the options table (most
-- C bindings check the table before anything else, so one tensor will do).
local CANDIDATES = {{}, {x}, {x, x}, {x, 1}, {sq, sq, sq}, {x, 1, 1}, {2}, {2, 2}, {2, 2, 2}, {{x, x}}}
local SAMPLES = {
  ["viewer.plot"] = {"loss", os.tmpname() .. ".png"}, ["viewer.log_options"] = {}, ["viewer.options"] = {},
  ["dbg.break_on"] = {},
  ["optim.lr_scheduler.StepLR"] = {opt, 2}, ["optim.lr_scheduler.CosineAnnealingLR"] = {opt, 2},
  ["optim.lr_scheduler.LambdaLR"] = {opt, function() return 1 end},
  ["nn.Conv2d"] = {1, 1, 1}, ["nn.MaxPool2d"] = {2}, ["nn.AvgPool2d"] = {2}, ["nn.LayerNorm"] = {3},
  ["nn.MultiheadAttention"] = {4, 2}, ["nn.Embedding"] = {3, 2},
}
for _, name in ipairs({"SGD", "Adam", "AdamW", "RMSprop", "Adagrad"}) do SAMPLES["optim." .. name] = {model:parameters()} end

-- Functions a trailing table with named fields is given to as a value (not options), and why.
local TABLE_IS_VALUE = {
  ["torch.scope"] = "calls fn(...) with the arguments that follow",
  ["torch.is_tensor"] = "any value", ["torch.is_frozen"] = "any value",
  ["torch._options.check"] = "its second argument is the table to check",
  ["nn.ModuleDict"] = "takes a table of name -> module",
  ["torch.Function"] = "takes a class definition: a table of methods (forward, backward)",
  ["torch.autograd.Function"] = "torch.Function under PyTorch's name",
}

-- Functions not called without the table (they would change the process's state for the rest).
local CHANGES_STATE = {["torch.set_memory_limit"] = true, ["torch.set_default_device"] = true,
                       ["torch.set_grad_enabled"] = true, ["torch.autograd.keep_backward_graph"] = true,
                       ["torch.no_grad"] = true, ["torch.enable_grad"] = true}

-- Calls fn(args..., BOGUS): the message, or nil when the call returned.
local function call_with_bogus(fn, args)
  local all = table.pack(table.unpack(args))
  all[all.n + 1] = BOGUS
  local ok, message = pcall(fn, table.unpack(all, 1, all.n + 1))
  if ok then return nil end
  return tostring(message)
end

local walked, failures = {}, {}

-- Walks one function: `called` is how the user calls it, `fn` a function taking the arguments
-- (a method: with its object first), `names` the names its error may start with.
-- `registered` is its name in the registry (F.conv2d is torch.conv2d). A call that returns may
-- have passed the table where the function takes no more arguments: another candidate is tried.
local function walk(called, fn, names, registered)
  walked[called] = true
  if TABLE_IS_VALUE[called] then return end
  local tries = SAMPLES[called] and {SAMPLES[called]} or CANDIDATES
  if not CHANGES_STATE[called] then   -- valid positional arguments first: the table then comes where options go
    for _, args in ipairs(tries) do
      if pcall(fn, table.unpack(args)) then
        tries = {args}
        break
      end
    end
  end
  local messages, returned = {}, nil
  for _, args in ipairs(tries) do
    local message = call_with_bogus(fn, args)
    if message == nil then
      returned = returned or #args
    elseif message:find("unknown option 'bogus_key'", 1, true) then
      local named = false
      for _, name in ipairs(names) do named = named or message:sub(1, #name + 1) == name .. ":" end
      local keys = registry[registered or called]
      local want = keys and #keys > 0 and ("it takes " .. table.concat(keys, ", ") .. ")") or "takes no options)"
      if not named then
        failures[#failures + 1] = called .. ": the error does not start with " .. table.concat(names, " or ") .. ": " .. message
      elseif not message:find(want, 1, true) then
        failures[#failures + 1] = called .. ": the error does not say '" .. want .. "': " .. message
      elseif not message:find(THIS_FILE .. ":", 1, true) or not message:find(":%d+%)$") then
        failures[#failures + 1] = called .. ": the error does not end with the caller's line: " .. message
      end
      return
    else
      messages[#messages + 1] = message
    end
  end
  if returned then
    failures[#failures + 1] = called .. ": accepted {bogus_key = 1} silently (after " .. returned .. " positional arguments)"
  else
    failures[#failures + 1] = called .. ": no call reached the options check (add a sample): " .. table.concat(messages, " | ")
  end
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

-- torch.*, and the subtables of functions (torch.nn and torch.optim are nn and optim: walked below).
for _, prefix in ipairs({"torch", "torch.autograd", "torch.onnx", "torch.cuda", "torch._options"}) do
  local t = prefix == "torch" and torch or torch[prefix:match("%.(.*)$")]
  for _, name in ipairs(sorted_keys(t)) do
    if type(t[name]) == "function" then walk(prefix .. "." .. name, t[name], {prefix .. "." .. name}) end
  end
end
-- x:f(...)
local methods = debug.getregistry()["tapedeck.Tensor"].methods
for _, name in ipairs(sorted_keys(methods)) do
  walk("x:" .. name, function(...) return methods[name](x, ...) end, {"x:" .. name})
end
-- F.f (F's functions that are torch's are registered under F too: their errors say F.f)
for _, name in ipairs(sorted_keys(F)) do walk("F." .. name, F[name], {"F." .. name}) end
-- nn's module classes, optim's optimizers and schedulers
for _, name in ipairs(sorted_keys(nn)) do
  local class = nn[name]
  if type(class) == "table" and rawget(class, "__is_module") then walk("nn." .. name, class, {"nn." .. name}) end
end
for _, name in ipairs(sorted_keys(optim)) do
  if name ~= "Optimizer" and name ~= "lr_scheduler" then walk("optim." .. name, optim[name], {"optim." .. name}) end
end
for _, name in ipairs(sorted_keys(optim.lr_scheduler)) do
  walk("optim.lr_scheduler." .. name, optim.lr_scheduler[name], {"optim.lr_scheduler." .. name})
end

-- The registry's other entries: methods of modules, frozen functions, hook handles, the progress line.
local OBJECTS = {
  ["m:"] = model, ["mha:"] = mha, ["f:"] = frozen,
  ["handle:"] = torch.rand(2):requires_grad_(true):register_hook(function() end),
  ["opt:"] = opt, ["scheduler:"] = optim.lr_scheduler.StepLR(optim.SGD(model:parameters(), {lr = 0.1}), 2),
  ["progress."] = require "tapedeck.progress", ["viewer."] = viewer, ["dbg."] = dbg,
}
for _, called in ipairs(sorted_keys(registry)) do
  if not walked[called] then
    local prefix, name = called:match("^(.-[:.])([%w_]+)$")
    local object = OBJECTS[prefix]
    if object == nil or object[name] == nil then
      failures[#failures + 1] = called .. ": in the registry, but no such function"
    elseif prefix:sub(-1) == ":" then
      walk(called, function(...) return object[name](object, ...) end, {called})
    else
      walk(called, object[name], {called})
    end
  end
end

-- Every registry entry was walked; and the walk reached the functions the issue names.
for _, called in ipairs({"torch.add", "x:add", "x:add_", "torch.sub", "x:sub_", "nn.Linear", "optim.SGD", "torch.save",
                         "torch.load", "torch.freeze", "torch.onnx.export", "F.cross_entropy"}) do
  assert(walked[called], called .. " is walked")
end
for called in pairs(registry) do assert(walked[called], called .. " (in the registry) is walked") end

-- The registry is complete: a library function with a parameter named opts or options reads an
-- options table, so it is registered under the name the user calls it by. The library's classes
-- (init), nn.Module's and optim.Optimizer's methods and F's functions, found by their parameters'
-- names.
local function reads_options(fn)
  if type(fn) ~= "function" or debug.getinfo(fn, "S").what == "C" then return false end
  for i = 1, debug.getinfo(fn, "u").nparams do
    local name = debug.getlocal(fn, i)
    if name == "opts" or name == "options" then return true end
  end
  return false
end
for _, name in ipairs(sorted_keys(nn)) do
  local class = nn[name]
  if type(class) == "table" and rawget(class, "__is_module") and reads_options(rawget(class, "init")) then
    assert(registry["nn." .. name] ~= nil, "nn." .. name .. " reads opts: it is in the options registry")
  end
end
for _, name in ipairs(sorted_keys(nn.Module)) do
  if reads_options(nn.Module[name]) then
    assert(registry["m:" .. name] ~= nil, "m:" .. name .. " reads opts: it is in the options registry")
  end
end
for _, name in ipairs(sorted_keys(optim.Optimizer)) do
  if reads_options(optim.Optimizer[name]) then
    assert(registry["opt:" .. name] ~= nil, "opt:" .. name .. " reads opts: it is in the options registry")
  end
end
for _, name in ipairs(sorted_keys(F)) do
  if reads_options(F[name]) then assert(registry["F." .. name] ~= nil, "F." .. name .. " is in the options registry") end
end

table.sort(failures)
assert(#failures == 0, #failures .. " functions do not check their options:\n  " .. table.concat(failures, "\n  "))
local count = 0
for _ in pairs(walked) do count = count + 1 end
print("test_options: ok (" .. count .. " functions walked)")

-- add and sub's alpha: keyword-only as PyTorch (its values and gradients: test_oracle's rows).
local a, b = torch.tensor({1, 2}), torch.tensor({10, 20})
check.close(torch.add(a, b, {alpha = 5}), {51, 102}, 0, "torch.add alpha")
check.close(a:sub(b, {alpha = 0.5}), {-4, -8}, 0, "x:sub alpha")
check.close(a:clone():add_(b, {alpha = 2}), {21, 42}, 0, "x:add_ {alpha =}")
check.close(a:clone():add_(b, 2), {21, 42}, 0, "x:add_ positional alpha")
check.fails("add", "alpha is keyword-only, as in PyTorch: torch.add(a, b, {alpha = 2}), got number", function() return torch.add(a, b, 5) end)
check.fails("mul", "mul takes two operands, got a number after them", function() return a:mul(b, 5) end)
check.fails("x:add", "unknown option 'alpah' (did you mean 'alpha'? it takes alpha)", function() return a:add(b, {alpah = 5}) end)
local ia, ib = torch.tensor({1, 2}, {dtype = torch.int64}), torch.tensor({3, 4}, {dtype = torch.int64})
check.equal(torch.add(ia, ib, {alpha = 2}).dtype, "int64", "int64 + integer alpha stays int64")
check.fails("add", "alpha must be an integer when both operands are integers, got 0.5", function() return torch.add(ia, ib, {alpha = 0.5}) end)

-- device on module constructors, as PyTorch's factory kwargs; "cuda" without a GPU is torch.zeros's error.
local on_cpu = nn.Linear(4, 4, {device = "cpu", dtype = "float64"})
check.equal(on_cpu.weight.device, "cpu", "nn.Linear device")
check.equal(on_cpu.weight.dtype, "float64", "nn.Linear dtype with device")
for _, make in ipairs({function(o) return nn.Conv2d(1, 2, 3, o) end, function(o) return nn.BatchNorm1d(3, o) end,
                       function(o) return nn.LayerNorm(3, o) end, function(o) return nn.Embedding(5, 3, o) end,
                       function(o) return nn.MultiheadAttention(4, 2, o) end, function(o) return nn.LSTM(3, 4, o) end,
                       function(o) return nn.GRUCell(3, 4, o) end}) do
  for _, p in ipairs(make({device = "cpu"}):parameters()) do check.equal(p.device, "cpu", "device = cpu") end
end
if not torch.cuda.is_available() then
  local _, zeros_error = pcall(torch.zeros, 1, {device = "cuda"})
  local reason = zeros_error:match("^zeros: (.-) %(")
  check.fails("Linear", reason, function() local _ = nn.Linear(4, 4, {device = "cuda"}) end)
  check.fails("LSTM", reason, function() local _ = nn.LSTM(3, 4, {device = "cuda"}) end)
else
  check.equal(nn.Linear(4, 4, {device = "cuda"}).weight.device, "cuda", "nn.Linear on the GPU")
end

-- zero_grad{set_to_none = false}, as PyTorch's keyword, on modules and optimizers.
local zl = nn.Linear(2, 1)
zl(torch.ones(1, 2)):sum():backward()
zl:zero_grad{set_to_none = false}
check.close(zl.weight.grad, {{0, 0}}, 0, "m:zero_grad{set_to_none = false} zeroes in place")
zl:zero_grad{}
check.equal(zl.weight.grad, nil, "m:zero_grad{} drops the gradients")
check.fails("m:zero_grad", "unknown option 'set_to_nne' (did you mean 'set_to_none'?", function() zl:zero_grad{set_to_nne = false} end)
check.fails("opt:zero_grad", "unknown option 'set_to_nne' (did you mean 'set_to_none'?", function() opt:zero_grad{set_to_nne = false} end)
check.fails("Linear", "unknown device 'tpu'", function() local _ = nn.Linear(4, 4, {device = "tpu"}) end)
print("test_options: alpha and device ok")
