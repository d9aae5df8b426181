-- Weights move between PyTorch and tapedeck through files: a PyTorch model's state_dict exported
-- with numpy.savez and as safetensors (tests/oracle/make_state_dict_fixtures.py) loads into the
-- same architecture written in Lua, which then computes PyTorch's output; and a state_dict saved
-- here loads back into a fresh model.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")
local here = arg[0]:match("^(.*[/\\])") or "./"
local fixtures = here .. "../oracle/state_dict/"
local expected = dofile(fixtures .. "pytorch_mlp_expected.lua")

local function mlp()
  return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
end

local function keys_in_order(sd)
  local keys = {}
  for k in pairs(sd) do keys[#keys + 1] = k end
  return keys
end

-- The model's keys are PyTorch's, in PyTorch's order.
check.equal(table.concat(keys_in_order(mlp():state_dict()), " "), table.concat(expected.keys, " "),
            "state_dict keys as PyTorch's")

local x = torch.tensor(expected.x)
for _, file in ipairs({"pytorch_mlp.npz", "pytorch_mlp.safetensors"}) do
  local model = mlp()
  local result = model:load_state_dict(torch.load(fixtures .. file))   -- strict
  check.equal(#result.missing_keys + #result.unexpected_keys, 0, file .. ": every key matched")
  model:eval()
  check.close(model(x), expected.y, 1e-6, file .. ": PyTorch's output")
  check.equal(model[2].num_batches_tracked:item(), 1, file .. ": num_batches_tracked")
end

-- Saved here, loaded into a fresh model (other random weights): the same outputs, either format.
local trained = mlp()
trained:load_state_dict(torch.load(fixtures .. "pytorch_mlp.npz"))
trained:eval()
local dir = os.tmpname()
os.remove(dir)
for _, extension in ipairs({".npz", ".safetensors"}) do
  local path = dir .. extension
  torch.save(trained:state_dict(), path)
  torch.manual_seed(42)
  local fresh = mlp()
  fresh:load_state_dict(torch.load(path))
  fresh:eval()
  check.close(fresh(x), expected.y, 1e-6, extension .. ": round trip through a file")
  os.remove(path)
end

-- A tensor the model does not have is still an unexpected key (the metadata string is not).
local sd = torch.load(fixtures .. "pytorch_mlp.safetensors")
check.equal(sd.format, nil, "the safetensors metadata is not an entry")
check.equal(torch.load_metadata(fixtures .. "pytorch_mlp.safetensors").format, "pt", "torch.load_metadata has it")
sd["4.weight"] = torch.zeros(2)
check.fails("load_state_dict", "unexpected keys: \"4.weight\"", function() mlp():load_state_dict(sd) end)

print("test_state_dict_files: ok")
