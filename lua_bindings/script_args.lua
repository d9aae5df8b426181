-- script_args.lua: the command-line options of a model script, require "tapedeck.args".
--
--   local options = require("tapedeck.args").parse{steps = 2000, freeze = false}
--   -- tapedeck scripts/models/spiral_mlp.lua --steps 300 --freeze
--   -- options.steps == 300, options.freeze == true
--
-- The defaults say which options exist and what each takes: a boolean default is a flag
-- (`--freeze`), an integer default takes an integer (`--steps 300` or `--steps=300`), another
-- number a number, a string a string. `--help` prints the options and exits. Anything else is an
-- error naming the argument. Reads Lua's global `arg` (what tapedeck passes after the script name)
-- unless a list is given: parse(defaults, {"--steps", "5"}).
-- Embedded in tapedeck (no global).
local script_args = {}

local errors = require "tapedeck.errors"
local fail, describe = errors.fail, errors.describe

-- "--steps N, --freeze" for messages and --help.
local function usage(defaults)
  local names = {}
  for name, default in pairs(defaults) do
    if type(default) == "boolean" then names[#names + 1] = "--" .. name
    elseif math.type(default) == "integer" then names[#names + 1] = "--" .. name .. " N"
    elseif type(default) == "number" then names[#names + 1] = "--" .. name .. " X"
    else names[#names + 1] = "--" .. name .. " TEXT" end
  end
  table.sort(names)
  return table.concat(names, ", ")
end

-- The value text converted to the default's type, or an error naming the option.
local function converted(name, default, text, defaults)
  if text == nil then fail("args: --" .. name .. " needs a value (options: " .. usage(defaults) .. ")") end
  if type(default) == "string" then return text end
  local n = math.tointeger(tonumber(text))
  if math.type(default) == "integer" then
    if not n then fail("args: --" .. name .. " must be an integer, got " .. describe(text)) end
    return n
  end
  local x = tonumber(text)
  if not x then fail("args: --" .. name .. " must be a number, got " .. describe(text)) end
  return x
end

-- The options: a copy of `defaults` with what the command line sets.
function script_args.parse(defaults, argv)
  if type(defaults) ~= "table" then fail("args: defaults must be a table ({steps = 100}), got " .. describe(defaults)) end
  for name, default in pairs(defaults) do
    local t = type(default)
    if type(name) ~= "string" or not (t == "boolean" or t == "number" or t == "string") then
      fail("args: each default is name = boolean, number or string, got " .. describe(name) .. " = " .. describe(default))
    end
  end
  argv = argv or arg or {}
  local options = {}
  for name, default in pairs(defaults) do options[name] = default end
  local i = 1
  while argv[i] ~= nil do
    local word = argv[i]
    if type(word) ~= "string" then fail("args: argument " .. i .. " must be a string, got " .. describe(word)) end
    if word == "--help" or word == "-h" then
      print("options: " .. usage(defaults))
      os.exit(0)
    end
    local name, inline = word:match("^%-%-([%w_%-]+)=(.*)$")
    name = name or word:match("^%-%-([%w_%-]+)$")
    local key = name and name:gsub("%-", "_")
    if not key or defaults[key] == nil then
      fail("args: unknown argument " .. describe(word) .. " (options: " .. usage(defaults) .. ")")
    end
    if type(defaults[key]) == "boolean" then
      if inline then fail("args: --" .. name .. " is a flag and takes no value, got " .. describe(word)) end
      options[key] = true
    elseif inline then
      options[key] = converted(name, defaults[key], inline, defaults)
    else
      i = i + 1
      options[key] = converted(name, defaults[key], argv[i], defaults)
    end
    i = i + 1
  end
  return options
end

return script_args
