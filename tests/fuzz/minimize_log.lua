-- minimize_log.lua: shrink an api_fuzz log (a reproducer) to the fewest calls that still show a
-- finding: delta debugging over its C(...) lines, the runtime prelude kept as it is.
--
--   tapedeck tests/fuzz/minimize_log.lua BINARY LOG PATTERN [OUT]
--
--   BINARY   the tapedeck that shows the finding (e.g. a sanitizer build)
--   LOG      a log written by api_fuzz.lua --log (run_api_fuzz.sh keeps them in crashes/)
--   PATTERN  plain text the run's output (stdout and stderr) must contain, e.g. "heap-use-after-free"
--            or "kernels_cpu.cpp:1040"
--   OUT      where to write the smaller log (default LOG with .min.lua)
--
-- Each candidate runs as `BINARY candidate </dev/null` with a 60 s timeout; ASAN_OPTIONS etc. are
-- passed on. Prints the number of calls left; the result replays with `BINARY OUT </dev/null`.
local binary, log_path, pattern, out_path = arg[1], arg[2], arg[3], arg[4]
if not (binary and log_path and pattern) then
  io.stderr:write("usage: tapedeck minimize_log.lua BINARY LOG PATTERN [OUT]\n")
  os.exit(2)
end
out_path = out_path or log_path:gsub("%.lua$", "") .. ".min.lua"

local prelude, calls = {}, {}
for line in io.lines(log_path) do
  if line:match("^C%(") then calls[#calls + 1] = line
  elseif line ~= "APIFUZZ_CLEANUP()" then prelude[#prelude + 1] = line end
end
local head = table.concat(prelude, "\n") .. "\n"
local candidate = os.tmpname()
local runs = 0

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Whether these calls (a list of lines) still show the finding.
local function fails(lines)
  local f = assert(io.open(candidate, "w"))
  f:write(head, table.concat(lines, "\n"), "\nAPIFUZZ_CLEANUP()\n")
  f:close()
  runs = runs + 1
  local p = io.popen("timeout -k 5 60 " .. shell_quote(binary) .. " " .. shell_quote(candidate) .. " </dev/null 2>&1")
  local output = p:read("a")
  p:close()
  return output:find(pattern, 1, true) ~= nil
end

if not fails(calls) then
  io.stderr:write("minimize_log: the log does not show '", pattern, "' with ", binary, "\n")
  os.remove(candidate)
  os.exit(1)
end

-- ddmin: drop chunks of n lines, halving n down to 1; the last call (the crashing one) is tried too.
local n = math.max(1, #calls // 2)
while true do
  local changed = false
  local i = 1
  while i <= #calls do
    local trial = {}
    for k = 1, #calls do if k < i or k >= i + n then trial[#trial + 1] = calls[k] end end
    if #trial < #calls and fails(trial) then
      calls = trial
      changed = true
      io.stderr:write(string.format("minimize_log: %d calls (%d runs)\n", #calls, runs))
    else
      i = i + n
    end
  end
  if n == 1 and not changed then break end
  if not changed then n = math.max(1, n // 2) end
end

local f = assert(io.open(out_path, "w"))
f:write(head, table.concat(calls, "\n"), "\nAPIFUZZ_CLEANUP()\n")
f:close()
os.remove(candidate)
print(string.format("minimize_log: %d calls left after %d runs: %s", #calls, runs, out_path))
for _, line in ipairs(calls) do print("  " .. line) end
