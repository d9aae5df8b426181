-- docs/lua_api.md is the whole Lua API: every torch.name function, every F.name and every tensor
-- method must be named there (as a whole word), and every frozen function's method as f:name, so a
-- new function cannot go undocumented.
local here = arg[0]:match("^(.*[/\\])") or "./"
local file = assert(io.open(here .. "../../docs/lua_api.md"))
local doc = file:read("a")
file:close()

local function documented(name)
  return doc:find("%f[%w_]" .. name:gsub("_", "%%_") .. "%f[^%w_]") ~= nil
end

local missing = {}
for name, value in pairs(torch) do
  if type(value) == "function" and not documented(name) then missing[#missing + 1] = "torch." .. name end
end
for name in pairs(F) do
  if not documented(name) then missing[#missing + 1] = "F." .. name end
end
for name in pairs(debug.getregistry()["tapedeck.Tensor"].methods) do
  if not documented(name) then missing[#missing + 1] = "x:" .. name end
end
for name in pairs(debug.getregistry()["tapedeck.Frozen"].methods) do
  if not doc:find("f:" .. name, 1, true) then missing[#missing + 1] = "f:" .. name end
end
table.sort(missing)
assert(#missing == 0, "not in docs/lua_api.md: " .. table.concat(missing, ", "))
print("test_docs_complete: ok")
