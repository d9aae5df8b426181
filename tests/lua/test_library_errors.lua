-- Errors from the Lua-written library (nn, optim) name the function the user called and end with
-- the user's file:line, like the bindings' errors (found by tests/fuzz/api_fuzz.lua: before, bad
-- arguments gave "tapedeck/nn.lua:173: attempt to index a number value (local 'opts')", optim's
-- errors had no line, nn.Linear(1.5, 2) said "rand: argument -1 ...").
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

-- nn: sizes and options are checked where the module is made
check.fails("Linear", "in_features must be an integer >= 0, got 1.5", function() nn.Linear(1.5, 2) end)
check.fails("Linear", "out_features must be an integer >= 0, got nil", function() nn.Linear(2) end)
check.fails("nn.Linear", "options must be a table like {bias = false}, got 5", function() nn.Linear(2, 3, 5) end)
check.fails("nn.Linear", "unknown option 'biass' (did you mean 'bias'? it takes bias, device, dtype)", function() nn.Linear(2, 3, {biass = false}) end)
check.fails("Linear", "dtype must be \"float32\" or \"float64\", got \"int64\"", function() nn.Linear(2, 3, {dtype = "int64"}) end)
check.fails("Linear", "rand: ", function() nn.Linear(2^40, 2^20) end)   -- the size is refused, named Linear
check.fails("Conv2d", "kernel_size must be an integer >= 1, got 0", function() nn.Conv2d(1, 2, 0) end)
check.fails("Conv2d", "padding must be an integer >= 0, got -1", function() nn.Conv2d(1, 2, 3, {padding = -1}) end)
check.fails("nn.Conv2d", "unknown option 'bogus'", function() nn.Conv2d(1, 2, 3, {bogus = 1}) end)
check.fails("MaxPool2d", "kernel_size must be an integer >= 1, got \"2\"", function() nn.MaxPool2d("2") end)
check.fails("Flatten", "start_dim must be an integer", function() nn.Flatten("x") end)
check.fails("Softmax", "dim must be an integer", function() nn.Softmax() end)
check.fails("MSELoss", "options must be a table", function() nn.MSELoss(5) end)
check.fails("CrossEntropyLoss", "reduction must be \"mean\", \"sum\" or \"none\", got \"bogus\"", function() nn.CrossEntropyLoss{reduction = "bogus"} end)
check.fails("Parameter", "expects a tensor, got 5", function() nn.Parameter(5) end)
check.fails("Sequential", "argument 2 is not a module, got 3", function() nn.Sequential(nn.ReLU(), 3) end)
check.fails("Sequential", "argument 1 is not a module, got nil", function() nn.Sequential(nil, nn.ReLU()) end)
check.fails("Module:extend", "give the class a name", function() nn.Module:extend() end)
local NoForward = nn.Module:extend("NoForward")
check.fails("NoForward", "forward is not defined", function() NoForward()(torch.ones(1)) end)

-- nn: a module called on something that is not a tensor: the op it runs names it
check.fails("relu", "argument 1: tensor expected, got number", function() nn.ReLU()(5) end)
check.fails("flatten", "argument 1: tensor expected, got nil", function() nn.Flatten()(nil) end)
check.fails("softmax", "argument 1: tensor expected, got string", function() nn.Softmax(1)("x") end)

-- optim: lists, options and their types
local params = nn.Linear(2, 1):parameters()
check.fails("SGD", "expects a list of parameters (model:parameters()), got an empty list", function() optim.SGD({}, {lr = 1}) end)
check.fails("SGD", "expects a list of parameters (model:parameters()), got nil", function() optim.SGD(nil, {lr = 1}) end)
check.fails("Adam", "parameter 2 is \"x\", not a tensor", function() optim.Adam({params[1], "x"}) end)
check.fails("SGD", "options must be a table like {lr = 0.01}, got 5", function() optim.SGD(params, 5) end)
check.fails("optim.SGD", "unknown option 'momentun' (did you mean 'momentum'?", function() optim.SGD(params, {lr = 0.1, momentun = 0.9}) end)
check.fails("SGD", "lr must be a number >= 0, got nil", function() optim.SGD(params, {}) end)
check.fails("SGD", "lr must be a number >= 0, got -1", function() optim.SGD(params, {lr = -1}) end)
check.fails("SGD", "lr must be a number >= 0, got " .. tostring(0 / 0), function() optim.SGD(params, {lr = 0 / 0}) end)
check.fails("SGD", "weight_decay must be a number >= 0, got \"x\"", function() optim.SGD(params, {lr = 1, weight_decay = "x"}) end)
check.fails("SGD", "nesterov must be true or false, got 1", function() optim.SGD(params, {lr = 1, nesterov = 1}) end)
check.fails("Adam", "betas must be two numbers in [0, 1)", function() optim.Adam(params, {betas = 5}) end)
check.fails("Adam", "eps must be a number >= 0, got \"x\"", function() optim.Adam(params, {eps = "x"}) end)

-- optim: step and zero_grad called with a dot instead of a colon
local opt = optim.Adam(params)
check.fails("step", "call it on an optimizer, as opt:step(), got nil", function() opt.step() end)
check.fails("step", "call it on an optimizer, as opt:step(), got 5", function() optim.SGD.step(5) end)
check.fails("zero_grad", "call it on an optimizer, as opt:zero_grad(), got a table", function() opt.zero_grad({}) end)

-- and the good paths still work
opt:zero_grad()
local loss = nn.MSELoss{reduction = "sum"}(nn.Sequential(nn.Linear(2, 1, {dtype = "float32"}))(torch.ones(3, 2)), torch.zeros(3, 1))
loss:backward()
opt:step()
check.equal(#nn.Sequential(nn.Flatten(), nn.Softmax(-1)):children(), 2)
check.equal(nn.Conv2d(1, 2, 3, {stride = 2, padding = 1}).stride, 2)
check.equal(nn.MaxPool2d(2).stride, 2)
print("library errors ok")
