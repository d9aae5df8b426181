-- torch.onnx.export and torch.onnx.ops from a user's side: what a model holds, the options, the
-- warnings, and the errors (each names onnx.export and this file's line, and nothing is lost).
-- Run by tapedeck with one argument, a scratch directory.
local dir = assert(arg[1], "usage: tapedeck test_onnx_api.lua DIR")
local here = arg[0]:match("^(.*[/\\])") or "./"

local function fails_with(pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected an error matching " .. pattern)
  err = tostring(err)
  assert(err:find(pattern), "error '" .. err .. "' does not match " .. pattern)
  return err
end

-- A training step: the model's inputs, initializers, outputs.
local W = torch.randn(4, 3, {requires_grad = true})
local function step(x)
  W.grad = nil
  local loss = x:mm(W):tanh():sum()
  loss:backward()
  torch.no_grad(function() W:sub_(W.grad * 0.1) end)
  return loss
end
local f = torch.freeze(step, torch.randn(2, 4))
local r = torch.onnx.export(f, dir .. "/step.onnx")
assert(table.concat(r.arguments, ",") == "x", table.concat(r.arguments, ","))
assert(table.concat(r.inputs, ",") == "x,W", "W is changed in place: an input with its initializer as default")
assert(table.concat(r.outputs, ",") == "output,W.grad,W.new", table.concat(r.outputs, ","))
assert(r.captured.W.node == W.node, "captured names the tensor W")
assert(r.functions == 1 and #r.warnings == 0)
local inlined = torch.onnx.export(f, dir .. "/step_inline.onnx", {inline = true, opset = 17})
assert(inlined.functions == 0 and inlined.nodes > r.nodes)

-- A value guard: the branch recorded, with a warning naming it; strict refuses.
local g = torch.freeze(function(x)
  local s = x:sum()
  if s:item() > 0 then return x * 2 end
  return x * 3
end, torch.ones(3))
local guarded = torch.onnx.export(g, dir .. "/guarded.onnx", {quiet = true})
assert(#guarded.warnings == 1 and guarded.warnings[1]:find("test_onnx_api.lua:%d+"), guarded.warnings[1])
local err = fails_with("strict", torch.onnx.export, g, dir .. "/guarded_strict.onnx", {strict = true})
assert(err:find("onnx.export") and err:find("test_onnx_api.lua:%d+"), err)

-- An op with no ONNX form: the step, its op and its line.
local sampler = torch.freeze(function(p) return torch.multinomial(p, 2) end, torch.tensor({0.2, 0.8}))
err = fails_with("multinomial", torch.onnx.export, sampler, dir .. "/sampler.onnx")
assert(err:find("test_onnx_api.lua:%d+") and err:find("not exported"), err)

-- Wrong arguments.
fails_with("frozen function", torch.onnx.export, step, dir .. "/x.onnx")
fails_with("unknown option 'inlined'", torch.onnx.export, f, dir .. "/x.onnx", {inlined = true})
fails_with("opset 13: tapedeck writes opset 17", torch.onnx.export, f, dir .. "/x.onnx", {opset = 13})
fails_with("cannot write", torch.onnx.export, f, dir .. "/no/such/dir/x.onnx")
fails_with("path must be a string", torch.onnx.export, f)

-- A plan file, and a file that is not one.
torch.save_plan(f, dir .. "/step.tdp")
local from_file = torch.onnx.export(dir .. "/step.tdp", dir .. "/from_file.onnx")
assert(table.concat(from_file.outputs, ",") == "output,W.grad,W.new", table.concat(from_file.outputs, ","))
local bad = io.open(dir .. "/bad.tdp", "wb")
bad:write("not a plan")
bad:close()
fails_with("load_plan", torch.onnx.export, dir .. "/bad.tdp", dir .. "/bad.onnx")

-- The mapping table: every op maps or says why not; docs/onnx.md lists each as the program does.
local doc = assert(io.open(here .. "../../docs/onnx.md")):read("a")
local count = 0
for op, m in pairs(torch.onnx.ops()) do
  count = count + 1
  assert((m.onnx ~= nil) ~= (m.refused ~= nil), op)
  local row = "| `" .. op .. "` | " .. (m.onnx or ("not exported: " .. m.refused)) .. " |"
  assert(doc:find(row, 1, true), "docs/onnx.md lacks the row " .. row)
end
assert(count > 120)
print("test_onnx_api: ok")
