-- PyTorch is the oracle: every row of tests/oracle/oracle_data.lua (made by make_oracle.py with
-- PyTorch) is evaluated here as tapedeck Lua, in float64; its output and the gradient of
-- sum(output * w) for each input must equal PyTorch's (a row whose output has no gradient, as
-- isnan's or a creation's, checks values and dtype only). Every op Lua gets from the op table
-- (x:name()) and every F.name op must have a row, so a new one cannot go untested.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")
local here = arg[0]:match("^(.*[/\\])") or "./"
local rows = dofile(here .. "../oracle/oracle_data.lua")

local TOLERANCE = 1e-12   -- float64 on both sides; the math libraries may differ in the last bits

local function tensor_of(data, requires_grad)
  local t = torch.tensor(data.values, {dtype = data.dtype or "float64"}):reshape(table.unpack(data.shape))
  if requires_grad and t.dtype == "float64" then t:requires_grad_() end
  return t
end

-- A PyTorch tuple is several Lua returns, in order; int64 outputs (indices) are compared exactly.
local rows_by_name = {}
for _, row in ipairs(rows) do
  local what = row.name .. ": " .. row.lua
  rows_by_name[row.name] = true
  local env = setmetatable({}, {__index = _G})
  for name, data in pairs(row.inputs) do env[name] = tensor_of(data, true) end
  local outs = table.pack(assert(load("return " .. row.lua, what, "t", env))())
  check.equal(outs.n, #row.outputs, what .. ": number of results")
  local loss
  for i, want in ipairs(row.outputs) do
    local out, label = outs[i], what .. ": output " .. i
    check.equal(out.dtype, want.dtype or "float64", label .. " dtype")
    check.shape(out, want.shape, label)
    check.close(out, want.values, want.dtype == "int64" and 0 or TOLERANCE, label)
    if row.ws[i] then
      local term = (out * tensor_of(row.ws[i], false)):sum()
      loss = loss and loss + term or term
    end
  end
  if loss and loss.requires_grad then loss:backward() end
  for name, grad in pairs(row.grads) do
    local got = env[name].grad or torch.zeros(table.unpack(grad.shape))   -- no gradient flowed: zeros
    check.close(got, grad.values, TOLERANCE, what .. ": gradient of " .. name)
  end
end

for _, op in ipairs(torch.ops()) do
  if op.from_table or op.functional then
    assert(rows_by_name[op.name], "op " .. op.name .. " is a Lua function from the op table but has no PyTorch row in tests/oracle/make_oracle.py")
  end
end
print(#rows .. " rows agree with PyTorch")
