-- nn modules against PyTorch (tests/oracle/make_nn_oracle.py -> nn_oracle_data.lua): each module
-- built by its Lua constructor, loaded with PyTorch's float64 state_dict, run in train or eval mode;
-- output, parameter and input gradients of sum(output * R) and the running stats after the forward
-- within 1e-10. Then state_dict keys, parameter names, counts and printed text of nested models.
local here = arg[0]:match("^(.*[/\\])") or ""
local check = dofile(here .. "check.lua")
local oracle = dofile(here .. "../oracle/nn_oracle_data.lua")

local tensor_of, close = check.entry_tensor, check.matches

for _, case in ipairs(oracle.cases) do
  local module = load("return " .. case.lua)()
  module:double()
  local sd = {}
  for key, entry in pairs(case.state) do sd[key] = tensor_of(entry) end
  module:load_state_dict(sd)
  if case.train then module:train() else module:eval() end
  local x = tensor_of(case.input)
  if x.dtype == "int64" then x = x + 1 else x:requires_grad_(true) end   -- 1-based indices
  local target = case.target and tensor_of(case.target)
  if target and target.dtype == "int64" then target = target + 1 end
  local out
  for _ = 1, case.steps do out = target and module(x, target) or module(x) end
  close(out, case.output, case.name .. ": output")
  local weighted = (out * tensor_of(case.R)):sum()
  weighted:backward()
  local n_grads = 0
  for _, pair in ipairs(module:named_parameters()) do
    local expected = case.grads[pair[1]]
    assert(expected, case.name .. ": PyTorch has no gradient for " .. pair[1])
    close(pair[2].grad, expected, case.name .. ": grad " .. pair[1])
    n_grads = n_grads + 1
  end
  local n_expected = 0
  for _ in pairs(case.grads) do n_expected = n_expected + 1 end
  check.equal(n_grads, n_expected, case.name .. ": parameters with gradients")
  if case.input_grad then close(x.grad, case.input_grad, case.name .. ": input grad") end
  local now = module:state_dict()
  for key, entry in pairs(case.buffers_after) do close(now[key], entry, case.name .. ": " .. key) end
end

-- Nested models: keys, names, counts and print(model) exactly PyTorch's.
local Net = nn.Module:extend("Net")
function Net:init()
  self.scale = nn.Parameter(torch.ones(2))
  self.body = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
  self:register_buffer("mask", torch.ones(4))
  self.heads = nn.ModuleList({nn.Linear(4, 1), nn.Linear(4, 2, {bias = false})})
  self.norms = nn.ModuleDict({{"ln", nn.LayerNorm(4)}, {"bn", nn.BatchNorm1d(4, {momentum = false})}})
end
local models = {
  nested_sequential = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Sequential(nn.Tanh())),
                                    nn.Linear(3, 1)),
  module_list = nn.ModuleList({nn.Linear(2, 2), nn.ModuleList({nn.Conv2d(1, 2, 3, {stride = 2, bias = false})})}),
  module_dict = nn.ModuleDict({{"conv", nn.Conv2d(1, 4, {3, 5}, {padding = 1})}, {"pool", nn.MaxPool2d(2)},
                               {"avg", nn.AvgPool2d(2)}, {"emb", nn.Embedding(10, 3, {padding_idx = 1})}}),
  custom = Net(),
  cnn = nn.Sequential(nn.Conv2d(1, 8, 3, {padding = 1}), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.25),
                      nn.AdaptiveAvgPool2d({1, 1}), nn.Flatten(), nn.Linear(8, 10), nn.GELU(), nn.LeakyReLU(),
                      nn.SiLU(), nn.Identity(), nn.Sigmoid(), nn.CrossEntropyLoss(), nn.MSELoss()),
}
-- Where Lua prints the 1-based dim or index the user wrote (docs: differences from PyTorch).
local lua_spelling = {{"Flatten(start_dim=1,", "Flatten(start_dim=2,"}, {"padding_idx=0)", "padding_idx=1)"}}
for name, expected in pairs(oracle.models) do
  local model = models[name]
  local keys = {}
  for key in pairs(model:state_dict()) do keys[#keys + 1] = key end
  check.equal(table.concat(keys, " "), table.concat(expected.state_dict_keys, " "), name .. ": state_dict keys")
  local names = {}
  for i, pair in ipairs(model:named_parameters()) do names[i] = pair[1] end
  check.equal(table.concat(names, " "), table.concat(expected.parameter_names, " "), name .. ": parameter names")
  check.equal(model:num_parameters(), expected.n_parameters, name .. ": num_parameters")
  local printed = expected.printed
  for _, pair in ipairs(lua_spelling) do printed = printed:gsub(pair[1]:gsub("%p", "%%%0"), pair[2]) end
  check.equal(tostring(model), printed, name .. ": printed")
end

-- A name a module does not have is an error naming it (PyTorch's AttributeError / IndexError),
-- never a nil that fails later: containers count from 1, a misspelt member gets the close names.
-- Optional members PyTorch sets to None (Linear's bias without bias, BatchNorm's affine and
-- running stats, LayerNorm's) read nil, as do fields the module assigned, even to nil.
local seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
local one_based = "no module [0]: modules are numbered from 1 in Lua: model[1] is PyTorch's model[0]"
check.fails("Sequential", one_based, function() return seq[0] end)
check.fails("Sequential", "no module [-1]", function() return seq[-1] end)
check.fails("Sequential", "no module [4]: it holds 3 (model[1] .. model[3])", function() return seq[4] end)
check.fails("ModuleList", "no module [0]", function() return nn.ModuleList({nn.ReLU()})[0] end)
check.equal(seq[3].out_features, 1, "model[3]")
local visited = 0
for _ in ipairs(seq) do visited = visited + 1 end
check.equal(visited, 3, "ipairs stops at the end without an error")
check.equal(#seq, 3)
local Net = nn.Module:extend("FieldsNet")
function Net:init() self.fc1 = nn.Linear(2, 2); self.fc2 = nn.Linear(2, 1); self.cache = nil; self.steps = 0 end
function Net:forward(x)
  if self.cache then return self.cache end   -- an optional field declared as nil reads nil
  return self.fc2(self.fc1(x))
end
local net = Net()
check.equal(tostring(net(torch.ones(1, 2)).shape), "[1,1]", "a module reading its optional field")
check.equal(net.cache, nil, "a field assigned nil in init reads nil")
net.steps = nil
check.equal(net.steps, nil, "a field set to nil later reads nil")
check.fails("FieldsNet", "no field, member or method 'fc3' (did you mean fc1, fc2?)", function() return net.fc3 end)
check.fails("FieldsNet", "no field, member or method 'paramters' (did you mean parameters?)", function() return net:paramters() end)
check.fails("FieldsNet", "no field, member or method 'zzz' (its members: fc1, fc2)", function() return net.zzz end)
local dict = nn.ModuleDict({decoder = nn.ReLU()})
check.fails("ModuleDict", "no field, member or method 'decodr' (did you mean decoder?)", function() return dict.decodr end)
check.equal(nn.Linear(2, 2, {bias = false}).bias, nil, "Linear without bias: bias is nil, as PyTorch's None")
check.equal(nn.Conv2d(1, 1, 3, {bias = false}).bias, nil, "Conv2d without bias")
local bn = nn.BatchNorm1d(3, {affine = false, track_running_stats = false})
check.equal(bn.weight == nil and bn.bias == nil and bn.running_mean == nil and bn.running_var == nil, true, "BatchNorm's Nones")
check.equal(#bn:parameters(), 0)
check.equal(next(bn:state_dict()), nil, "no state without affine and running stats, as PyTorch")
local ln = nn.LayerNorm(4, {elementwise_affine = false})
check.equal(ln.weight == nil and ln.bias == nil, true, "LayerNorm without affine")
check.equal(nn.MultiheadAttention(4, 2).q_proj_weight, nil, "MultiheadAttention's q_proj_weight is None with one in_proj")
check.equal(nn.Linear(2, 2, {bias = false}):extra_repr(), "in_features=2, out_features=2, bias=False")

print("test_nn_modules: ok")
