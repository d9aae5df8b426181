-- bench/peers.lua talking to a peer served by bench/peer_serve.py, with a made-up framework (no
-- torch, no TensorFlow): start, the version lines, setup (a steady mode with its calls per
-- sample, a fixed count, a cold mode, a mode that cannot run and one whose setup raises), samples,
-- done, a peer that dies in a sample (the column fails with the end of its stderr, later requests
-- fail at once), close. Skipped when there is no python3.
local here = arg[0]:match("^(.*[/\\])") or "./"
local bench_dir = here .. "../../bench/"
local peers = dofile(bench_dir .. "peers.lua")

if not peers.find_python("sys") then
  print("test_bench_peers_protocol: skipped (no python3)")
  return
end

-- The made-up framework: "W1" has modes fast (steady), ten (10 calls a sample), cold (ColdStep),
-- missing (a reason instead of a step), raising (its warm-up raises) and dying (exits in a sample).
local script = os.tmpname() .. ".py"
local file = assert(io.open(script, "w"))
file:write(([[
import os, sys
sys.path.insert(0, %q)
from peer_serve import ColdStep, Framework, Step, Unsupported, main

class Fake(Framework):
    modes = ("fast",)

    def __init__(self, device):
        self.device = device

    def versions(self):
        return ["fake 1.0", "device " + self.device]

    def setup(self, name, modes):
        if name != "W1":
            raise Unsupported("no fake twin of " + name)

        def dying():   # no warm-up, one call a sample: its first call is in the first sample
            sys.stderr.write("the fake peer exits\n")
            os._exit(3)

        def raising():
            raise ValueError("cannot compile this")
        return {"fast": Step(lambda: None), "ten": Step(lambda: None, calls=10),
                "cold": ColdStep(lambda: (lambda: None)), "missing": "no such mode here",
                "raising": Step(raising), "dying": Step(dying, warmup=0, calls=1)}

main(Fake, ["W1"])
]]):format(bench_dir))
file:close()

local peer, why = peers.start{label = "Fake", module = "sys", script = script}
assert(peer, why)
assert(peer.versions[1] == "fake 1.0" and peer.versions[2] == "device cpu", table.concat(peer.versions, "|"))

local setup = peer:setup("W1", {"fast", "ten", "cold", "missing", "raising"})
assert(setup.fast.calls and setup.fast.calls >= 1, "a steady mode is calibrated")
assert(setup.ten.calls == 10, "a fixed count of calls")
assert(setup.cold.calls == 10, "a cold mode: 10 calls")
assert(setup.missing.failed == "no such mode here", tostring(setup.missing.failed))
assert(setup.raising.failed:find("ValueError: cannot compile this", 1, true), tostring(setup.raising.failed))
for _, mode in ipairs({"fast", "ten", "cold"}) do
  local us, err = peer:sample("W1", mode)
  assert(type(us) == "number" and us >= 0, mode .. ": " .. tostring(err))
end
local us, err = peer:sample("W1", "missing")
assert(us == nil and err == "no such mode here", "a sample of a mode that cannot run: " .. tostring(err))
peer:done("W1")
assert(select(2, peer:sample("W1", "fast")) == "not set up", "done drops the workload")

local other = peer:setup("W2", {"fast"})
assert(other.fast.failed == "no fake twin of W2", tostring(other.fast.failed))

-- A peer that dies in a sample: that sample fails with the end of its stderr, then every request.
assert(peer:setup("W1", {"dying"}).dying.calls == 1)
us, err = peer:sample("W1", "dying")
assert(us == nil and err:find("the fake peer exits", 1, true), tostring(err))
us, err = peer:sample("W1", "fast")
assert(us == nil and err == "the process had ended", tostring(err))
assert(peer:setup("W1", {"fast"}).fast.failed == "the process had ended")
peer:close()
os.remove(script)

local missing, reason = peers.start{label = "Nothing", module = "no_such_module_here", script = script}
assert(missing == nil and reason:find("Nothing is not installed", 1, true), tostring(reason))
print("test_bench_peers_protocol: ok")
