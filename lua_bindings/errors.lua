-- errors.lua: how the Lua-written library (nn, optim) reports bad input, as the C bindings do: the
-- message names the function the user called and ends with the user's file:line, e.g.
-- "Linear: in_features must be an integer >= 0, got 1.5 (model.lua:7)".
-- Loaded first, as require "tapedeck.errors" (no global).
local errors = {}

local getinfo = debug.getinfo

-- Whether a chunk's source (debug.getinfo's `source`) is the library's own code (nn, optim).
function errors.is_library_source(source) return source:sub(1, 10) == "=tapedeck/" end

-- "file.lua:12" of the innermost frame that is neither the library (nn, optim) nor a C function.
local function user_line()
  for level = 3, 60 do
    local info = getinfo(level, "Sl")
    if not info then return nil end
    if info.currentline > 0 and not errors.is_library_source(info.source) then return info.short_src .. ":" .. info.currentline end
  end
end

-- Raises message with the user's file:line appended.
function errors.fail(message)
  local where = user_line()
  error(where and (message .. " (" .. where .. ")") or message, 0)
end

-- A value as a message shows it: 1.5, nil, "x", a table, a tensor.
function errors.describe(v)
  if type(v) == "number" or type(v) == "boolean" or v == nil then return tostring(v) end
  if type(v) == "string" then return string.format("%q", v) end
  if torch.is_tensor(v) then return "a tensor" end
  return "a " .. type(v)
end

return errors
