-- check.lua: small assertions shared by the test_*.lua scripts (loaded with dofile, not a test).
-- A failed check raises an error: `tapedeck test_x.lua` then prints it with a traceback and
-- exits with status 1, which fails the ctest.
local check = {}

-- The script's name as error messages and node records show it ("test_x.lua:12" at the end).
local function script_name(level)
  local src = debug.getinfo(level + 1, "S").short_src
  return src:match("([^/\\]+)$")
end

-- Values of a tensor or a (nested) table, flattened in order.
local function flatten(x, out)
  out = out or {}
  if torch.is_tensor(x) then x = x:totable() end
  if type(x) == "table" then
    for _, v in ipairs(x) do flatten(v, out) end
  else
    out[#out + 1] = x
  end
  return out
end
check.flatten = flatten

-- a and b (tensors, nested tables or numbers) hold the same values within tol (1e-5 default).
function check.close(a, b, tol, what)
  tol = tol or 1e-5
  local fa, fb = flatten(a), flatten(b)
  if #fa ~= #fb then
    error(string.format("%s: %d values vs %d", what or "close", #fa, #fb), 2)
  end
  for i = 1, #fa do
    local x, y = fa[i], fb[i]
    local ok = (x == y) or (x ~= x and y ~= y) or math.abs(x - y) <= tol * (1 + math.abs(y))
    if not ok then
      error(string.format("%s: value %d is %.9g, expected %.9g", what or "close", i, x, y), 2)
    end
  end
end

-- Shape of a tensor as a table, compared with the expected sizes.
function check.shape(t, dims, what)
  local s = t.shape
  local ok = #s == #dims
  for i = 1, #dims do ok = ok and s[i] == dims[i] end
  if not ok then
    error(string.format("%s: shape %s, expected [%s]", what or "shape", tostring(s), table.concat(dims, ",")), 2)
  end
end

function check.equal(actual, expected, what)
  if actual ~= expected then
    error(string.format("%s: got %s, expected %s", what or "equal", tostring(actual), tostring(expected)), 2)
  end
end

-- fn() must fail with a message that starts with "op:", contains `pattern` (plain text) and ends
-- with " (test_x.lua:LINE)", LINE being the line this check is called on (keep fn on that line).
-- Returns the message.
function check.fails(op, pattern, fn)
  local line = debug.getinfo(2, "l").currentline
  local where = script_name(2) .. ":" .. line .. ")"
  local ok, message = pcall(fn)
  if ok then error(string.format("expected %s to fail (line %d)", op, line), 2) end
  message = tostring(message)
  local function fail(why) error(string.format("%s (line %d): %s\n  message: %s", op, line, why, message), 3) end
  if message:sub(1, #op + 1) ~= op .. ":" then fail("does not start with '" .. op .. ":'") end
  if not message:find(pattern, 1, true) then fail("does not contain '" .. pattern .. "'") end
  if message:sub(-#where) ~= where or not message:find(" (", 1, true) then fail("does not end with '" .. where .. "'") end
  return message
end

-- An oracle data entry {dtype =, shape = {...}, values = {...}} (the values flat, row-major) as a
-- tensor; float64 when the entry names no dtype.
function check.entry_tensor(entry)
  return torch.tensor(entry.values, {dtype = entry.dtype or "float64"}):reshape(entry.shape)
end

-- `actual` has the oracle entry's shape and values, within tol (default 1e-10: float64 oracles).
function check.matches(actual, entry, what, tol)
  check.shape(actual, entry.shape, what)
  check.close(actual, entry.values, tol or 1e-10, what)
end

-- VmHWM: the process's peak resident memory so far, in bytes (nil where /proc is not Linux's).
-- The memory tests (tests/memory/, test_freeze_long_unroll.lua) measure with it.
function check.peak_rss_bytes()
  local status = io.open("/proc/self/status")
  if not status then return nil end
  local text = status:read("a")
  status:close()
  local kb = text:match("VmHWM:%s*(%d+) kB")
  return kb and tonumber(kb) * 1024
end

return check
