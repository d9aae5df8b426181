-- model_parameter_names.lua SOURCE MODEL OUT: every parameter of a scripts/models model is known by
-- its module path (model.lstm.weight_ih_l0) in torch.graph (:graph's records, the viewer's labels)
-- and in the DOT text of torch.graphviz, while the script trains. No display needed.
--   tapedeck model_parameter_names.lua SOURCE MODEL OUT_DIR
-- The script's model is a local of its main chunk, after other locals (char_lstm.lua's 20,000
-- character codes in a table come first): names are looked up while the training step runs, as
-- the debugger and the viewer do, from inside the outermost module call.
local source, which, out = arg[1], arg[2], arg[3]
local script = source .. "/scripts/models/" .. which .. ".lua"
local checked = false
local scope = torch.scope
torch.scope = function(name, fn, module, ...)
  if checked or type(module) ~= "table" or not module.named_parameters then return scope(name, fn, module, ...) end
  checked = true   -- the outermost call: the script's model
  local results = table.pack(scope(name, fn, module, ...))
  local output = results[1]
  assert(torch.is_tensor(output), which .. ": the model returns a tensor")
  local names = {}
  for _, r in ipairs(torch.graph(output)) do names[r.id] = r.name end
  local dot_path = out .. "/names_" .. which .. ".dot"
  torch.graphviz(output, dot_path)
  local file = assert(io.open(dot_path))
  local dot = file:read("a")
  file:close()
  local count, unnamed = 0, {}
  for _, entry in ipairs(module:named_parameters()) do
    local key, p = entry[1], entry[2]
    local name = names[p.node]
    if name ~= nil then   -- a parameter this call used
      count = count + 1
      local suffix = "." .. key
      if name:sub(-#suffix) ~= suffix or #name <= #suffix then unnamed[#unnamed + 1] = key .. " (" .. name .. ")" end
      if not dot:find(name, 1, true) then unnamed[#unnamed + 1] = key .. " (not in the DOT text)" end
    end
  end
  for _, r in ipairs(torch.graph(output)) do
    if r.is_leaf and r.requires_grad and not r.name then unnamed[#unnamed + 1] = "#" .. r.id .. " (a parameter leaf with no name)" end
  end
  assert(#unnamed == 0, which .. ": parameters without their module path: " .. table.concat(unnamed, ", "))
  assert(count >= 2, which .. ": the model used its parameters: " .. count)
  print(("%s: %d parameters named by their module path, e.g. %s"):format(which, count,
        names[module:named_parameters()[1][2].node] or "?"))
  return table.unpack(results, 1, results.n)
end
arg = {[0] = script, "--steps", "1"}
if which == "spiral_mlp" then arg = {[0] = script, "--steps", "1", "--out", out .. "/names_spiral_mlp.png"} end
dofile(script)
torch.scope = scope
assert(checked, which .. ": the script called its model")
