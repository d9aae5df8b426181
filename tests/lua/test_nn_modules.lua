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

print("test_nn_modules: ok")
