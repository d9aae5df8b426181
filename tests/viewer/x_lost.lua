-- x_lost.lua: the script side of x_lost.sh. Run as `tapedeck --view x_lost.lua READY_FILE` under a
-- private X server that the test kills while this script computes. The viewer must close (with a
-- message, on stderr) and the script go on computing, then exit 0.
local ready_file = assert(arg[1], "usage: x_lost.lua READY_FILE")
assert(viewer.is_open(), "the viewer is open (tapedeck --view)")

torch.manual_seed(0)
local W = torch.randn(16, 16, {requires_grad = true})
local function step()
  local h = torch.randn(1, 16)
  for _ = 1, 4 do h = torch.mm(h, W):tanh() end
  local loss = h:sum()
  loss:backward()
  return loss:item()
end

for _ = 1, 5 do step() end
viewer.frame()
local f = assert(io.open(ready_file, "w"))   -- the test kills the X server now
f:write("ready\n")
f:close()

-- Keep computing (the node hook draws ~30 frames a second) until the viewer notices, at most 60 s.
local start = os.time()
local steps = 0
while viewer.is_open() and os.time() - start < 60 do
  step()
  viewer.frame()
  steps = steps + 1
end
assert(not viewer.is_open(), "the viewer closed within 60 s of the X server going")
local reopened, message = viewer.open()
assert(reopened == nil and message:find("X display was lost", 1, true),
       "a later viewer.open() says the display is gone: " .. tostring(message))
for _ = 1, 50 do step() end   -- and the engine goes on
print(("x_lost: the viewer closed after %d steps; 50 more steps ran; loss %.4f"):format(steps, step()))
