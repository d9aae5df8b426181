-- numpy_interop.lua save DIR | check DIR (run by numpy_interop.sh).
--   save:  torch.save of one state in three files (DIR/saved.npz, saved_compressed.npz,
--          saved.safetensors), and DIR/expected.json: every value as NumPy must read it.
--   check: DIR/back.npz and back.safetensors, which numpy_interop.py wrote from what it read,
--          load as the original state, exactly.
local mode, dir = arg[1], arg[2]
assert((mode == "save" or mode == "check") and dir, "usage: numpy_interop.lua save|check DIR")

local function state()
  torch.manual_seed(11)
  local w = torch.randn(3, 4)
  return {
    ["0"] = {weight = w:t(), bias = torch.randn(4, {dtype = "float64"})},   -- a view, saved in logical order
    embed = torch.arange(6):reshape(2, 3),                                   -- int64
    bn = {running_mean = torch.zeros(3), num_batches_tracked = torch.tensor(5, {dtype = "int64"})},
    lr = 0.001, step = 42, note = "h\u{e9}llo",
  }
end

-- The flat state as JSON: {"key": {"dtype": ..., "shape": [...], "values": [...]}} for tensors,
-- {"number": x, "integer": bool} and {"string": s} for the rest.
local function json_string(s) return '"' .. s:gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"' end
local function expected_json(flat)
  local parts = {}
  for key, v in pairs(flat) do
    local body
    if torch.is_tensor(v) then
      local values = {}
      for _, x in ipairs(v:reshape(-1):totable()) do values[#values + 1] = string.format("%.17g", x) end
      local shape = {}
      for i = 1, #v.shape do shape[i] = tostring(v.shape[i]) end
      body = string.format('{"dtype": "%s", "shape": [%s], "values": [%s]}', v.dtype, table.concat(shape, ", "), table.concat(values, ", "))
    elseif type(v) == "number" then
      body = string.format('{"number": %.17g, "integer": %s}', v, tostring(math.type(v) == "integer"))
    else
      body = '{"string": ' .. json_string(v) .. "}"
    end
    parts[#parts + 1] = json_string(key) .. ": " .. body
  end
  return "{" .. table.concat(parts, ",\n") .. "}\n"
end

local s = state()
local flat = {["0.weight"] = s["0"].weight, ["0.bias"] = s["0"].bias, embed = s.embed, ["bn.running_mean"] = s.bn.running_mean,
              ["bn.num_batches_tracked"] = s.bn.num_batches_tracked, lr = s.lr, step = s.step, note = s.note}

if mode == "save" then
  torch.save(s, dir .. "/saved.npz")
  torch.save(s, dir .. "/saved_compressed.npz", {compress = true})
  torch.save(s, dir .. "/saved.safetensors")
  local f = assert(io.open(dir .. "/expected.json", "w"))
  f:write(expected_json(flat))
  f:close()
  return
end

-- The loaded table's nesting as dotted keys.
local function dotted(t, prefix, out)
  out = out or {}
  for k, v in pairs(t) do
    local key = (prefix and prefix .. "." or "") .. tostring(k)
    if type(v) == "table" and not torch.is_tensor(v) then dotted(v, key, out) else out[key] = v end
  end
  return out
end

for _, name in ipairs({"back.npz", "back.safetensors"}) do
  local nested = torch.load(dir .. "/" .. name)
  assert(torch.is_tensor(nested["0"].weight) and torch.is_tensor(nested.bn.running_mean), name .. ": the nesting comes back")
  local loaded = dotted(nested)
  local count = 0
  for key, v in pairs(loaded) do
    count = count + 1
    local want = flat[key]
    assert(want ~= nil, name .. ": unexpected key " .. key)
    if torch.is_tensor(want) then
      assert(v.dtype == want.dtype and tostring(v.shape) == tostring(want.shape), name .. ": " .. key .. " dtype or shape")
      assert(torch.equal(v, want), name .. ": " .. key .. " values")
    else
      assert(v == want and math.type(v) == math.type(want), name .. ": " .. key .. " is " .. tostring(v))
    end
  end
  assert(count == 8, name .. ": " .. count .. " keys")
end
print("numpy interop: ok")
