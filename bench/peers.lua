-- peers.lua: the Python peers of `tapedeck bench`, bench_torch.py and bench_tf.py, each run as one
-- process that takes a timing sample when asked, so that bench.lua interleaves their samples with
-- tapedeck's own (the protocol: peer_serve.py's docstring). Linux only: a peer's answers come
-- back through a named pipe (mkfifo), its questions go to its stdin (io.popen(..., "w")).
--   local peers = dofile("bench/peers.lua")
--   local torch_peer, why = peers.start{label = "PyTorch", module = "torch", script = dir .. "bench_torch.py"}
--   torch_peer:setup("W2", {"eager", "script"})   --> {eager = {calls = 512}, script = {failed = "..."}}
--   torch_peer:sample("W2", "eager")              --> µs per call, or nil, why
--   torch_peer:done("W2"); torch_peer:close()
local peers = {}

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- The python3 that imports `module`: the one on PATH (a virtualenv or pyenv with pip's packages),
-- else Debian's /usr/bin/python3 (python3-torch), which a PATH python3 from pyenv does not see.
-- Returns its path and its version, or nil.
function peers.find_python(module)
  for _, candidate in ipairs({"python3", "/usr/bin/python3"}) do
    local probe = io.popen(("%s -c 'import sys, %s; print(\"FOUND\", sys.version.split()[0])' 2>/dev/null"):format(
      candidate, module))
    local found = probe and probe:read("a") or ""
    if probe then probe:close() end
    local version = found:match("FOUND (%S+)")
    if version then return candidate, version end
  end
end

-- The environment every peer runs in: one thread for every math library (OpenMP, MKL, OpenBLAS).
-- Debian's OpenBLAS 0.3.21 takes an AVX-512 CPU for a "Prescott" and runs ~5x slower unless told
-- the core type (docs/performance.md, "Peers and this machine"); on a CPU without AVX-512 that core type would crash.
local function peer_environment()
  local cpuinfo = io.open("/proc/cpuinfo")
  local avx512 = cpuinfo and cpuinfo:read("a"):find("avx512f", 1, true)
  if cpuinfo then cpuinfo:close() end
  return "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 TF_CPP_MIN_LOG_LEVEL=3 " ..
         (avx512 and "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX} " or "")
end

local Peer = {}
Peer.__index = Peer

-- Start spec.script --serve in the python3 that has spec.module. spec: label (for messages),
-- module, script, device ("cpu" unless given). Returns the peer, with its version lines in
-- `versions` ({"torch 2.15.0", ...}), its python in `python` and that one's version in
-- `python_version`; or nil and why not.
function peers.start(spec)
  local python, python_version = peers.find_python(spec.module)
  if not python then return nil, ("%s is not installed (python3 cannot import %s)"):format(spec.label, spec.module) end
  local fifo = os.tmpname()
  os.remove(fifo)
  if not os.execute("mkfifo " .. quote(fifo)) then return nil, "mkfifo failed: " .. fifo end
  local self = setmetatable({label = spec.label, fifo = fifo, stderr_path = fifo .. ".stderr", python = python,
                             python_version = python_version}, Peer)
  self.stdin = io.popen(("%s%s %s --serve --device %s > %s 2> %s"):format(peer_environment(), python,
    quote(spec.script), spec.device or "cpu", quote(fifo), quote(self.stderr_path)), "w")
  self.stdout = io.open(fifo, "r")   -- waits until the shell has opened the pipe for the peer's output
  self.versions = {}
  local lines, why = self:read_until_ready()
  if not lines then
    self:close()
    return nil, ("%s did not start: %s"):format(spec.label, why)
  end
  self.versions = lines
  return self
end

-- The last two lines the peer wrote on stderr (a Python error's last line says what failed), on
-- one line, each cut to 200 characters.
function Peer:stderr_tail()
  local file = io.open(self.stderr_path)
  if not file then return "" end
  local text = file:read("a")
  file:close()
  local tail = {}
  for line in text:gmatch("[^\n]+") do
    if not line:find("^%s*$") then tail[#tail + 1] = line:sub(1, 200) end
    if #tail > 2 then table.remove(tail, 1) end
  end
  return table.concat(tail, " | ")
end

-- The peer's lines up to its "ready", or nil and why (it exited: the end of its stderr).
function Peer:read_until_ready()
  local lines = {}
  while true do
    local line = self.stdout and self.stdout:read("l")
    if not line then
      self.dead = true
      return nil, "the process ended: " .. self:stderr_tail()
    end
    if line == "ready" then return lines end
    lines[#lines + 1] = line
  end
end

function Peer:send(command)
  self.stdin:write(command, "\n")
  self.stdin:flush()
end

-- Set up workload `name` in `modes` (its warm-up and calibration run in the peer): returns
-- {mode = {calls = n} or {failed = why}}. A dead peer fails every mode.
function Peer:setup(name, modes)
  local result = {}
  local lines, why = nil, "the process had ended"
  if not self.dead then
    self:send("setup " .. name .. " " .. table.concat(modes, " "))
    lines, why = self:read_until_ready()
  end
  for _, mode in ipairs(modes) do result[mode] = {failed = why} end
  for _, line in ipairs(lines or {}) do
    local mode, calls = line:match("^ok (%S+) (%d+)")
    if mode then result[mode] = {calls = tonumber(calls)} end
    local failed_mode, reason = line:match("^fail (%S+) (.*)")
    if failed_mode then result[failed_mode] = {failed = reason} end
  end
  return result
end

-- One sample of workload `name` in `mode`: µs per call, or nil and why.
function Peer:sample(name, mode)
  if self.dead then return nil, "the process had ended" end
  self:send(("sample %s %s"):format(name, mode))
  local line = self.stdout:read("l")
  if not line then
    self.dead = true
    return nil, "the process ended: " .. self:stderr_tail()
  end
  local value = tonumber(line)
  if value then return value end
  return nil, line:match("^fail (.*)") or line
end

-- Drop workload `name`'s steps in the peer.
function Peer:done(name)
  if self.dead then return end
  self:send("done " .. name)
  self:read_until_ready()
end

-- End the peer (end of its input) and remove its pipe and stderr file.
function Peer:close()
  if self.stdin then self.stdin:close() end   -- waits for the process to exit
  if self.stdout then self.stdout:close() end
  self.stdin, self.stdout, self.dead = nil, nil, true
  os.remove(self.fifo)
  os.remove(self.stderr_path)
end

return peers
