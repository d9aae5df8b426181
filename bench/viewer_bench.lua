-- viewer_bench.lua: how fast the graph viewer is (its targets: the layout of the 50-step
-- unrolled RNN, forward + backward, ready in <= 1 s without blocking frames; a frame with ~1,000
-- boxes on screen in <= 16 ms, on Mesa llvmpipe under Xvfb).
--   xvfb-run -a -s "-screen 0 1280x1024x24" tapedeck bench/viewer_bench.lua [steps=50] [frame_steps=54]
-- The layout part needs no display; the frame part is skipped (with a message) without one.
-- Times are min / median of repeated runs: this machine kind is noisy (docs/performance.md, "Peers and this machine").

local steps = tonumber(arg and arg[1]) or 50
local frame_steps = tonumber(arg and arg[2]) or 54

local function sorted(values)
  table.sort(values)
  return values[1], values[math.max(1, (#values + 1) // 2)], values[#values]
end

-- The lecture's RNN cell unrolled `n` steps (as scripts/rnn_unrolled.lua), forward + backward;
-- the tensors stay reachable (globals) so the graph stays on the tape.
local function build_rnn(n)
  torch.manual_seed(0)
  bench_keep = {}
  local W_h = (torch.randn(20, 20) * 0.1):requires_grad_(true)
  local W_x = torch.randn(20, 10, {requires_grad = true})
  local xs = torch.randn(n, 10)
  local h = torch.zeros(1, 20)
  for t = 1, n do
    local x = xs:narrow(1, t, 1)
    bench_keep[#bench_keep + 1] = x
    h = (torch.mm(W_h, h:t()) + torch.mm(W_x, x:t())):tanh():t()
  end
  local loss = h:sum()
  loss:backward()
  bench_keep.loss, bench_keep.W_h, bench_keep.W_x, bench_keep.xs = loss, W_h, W_x, xs
  return loss
end

-- 1. Layout: Graphviz dot on this thread, as the worker thread runs it.
build_rnn(steps)
local times, boxes, edges = {}, 0, 0
for i = 1, 7 do
  local seconds
  seconds, boxes, edges = viewer.time_layout()
  times[#times + 1] = seconds * 1000
end
local min, median = sorted(times)
print(("layout  rnn_unrolled %d steps fwd+bwd: %d nodes on the tape -> %d boxes, %d laid-out edges: %.0f / %.0f ms (min / median)")
      :format(steps, #torch.tape(), boxes, edges, min, median))

local ok, message = viewer.open(true)
if not ok then
  print("frames  skipped: " .. message)
  return
end

-- 2. The window while dot works: from open to the layout placed, frames keep coming.
viewer.close()
bench_keep = nil
collectgarbage()
collectgarbage()
assert(viewer.open(true))
local t0 = torch.perf_counter()
build_rnn(steps)
viewer.frame(1)                      -- the tape changed: the layout starts on the worker thread
local update_ms = viewer.model().update_ms
local frames_before = #viewer.bench_frames(0)
local drawn, slowest = 0, 0
local t_request = torch.perf_counter()
while true do
  local ms = viewer.bench_frames(1)
  drawn = drawn + 1
  slowest = math.max(slowest, ms[1] or 0)
  local m = viewer.model()
  local all_placed = true
  for _, b in ipairs(m.boxes) do if not b.laid_out then all_placed = false break end end
  if all_placed and #m.boxes > 0 then break end
  if torch.perf_counter() - t_request > 30 then error("the layout did not arrive in 30 s") end
end
local ready = torch.perf_counter() - t_request
print(("layout  ready %.0f ms after the tape changed, %d frames drawn meanwhile (slowest %.1f ms)")
      :format(ready * 1000, drawn, slowest))
print(("model   records + boxes rebuilt on the Lua thread for that change: %.1f ms"):format(update_ms))
local _ = frames_before + t0

-- 3. Frames with ~1,000 boxes: the whole graph on screen (level of detail: no labels, straight
-- edges), then zoomed in far enough for labels.
viewer.close()
bench_keep = nil
collectgarbage()
collectgarbage()
assert(viewer.open(true))
build_rnn(frame_steps)
viewer.wait_layout()
local function measure(what)
  viewer.frame(3)
  local all = {}
  for round = 1, 3 do
    for _, ms in ipairs(viewer.bench_frames(40)) do all[#all + 1] = ms end
  end
  local m = viewer.model()
  local visible = 0
  for _, b in ipairs(m.boxes) do if b.visible then visible = visible + 1 end end
  local fmin, fmedian, fmax = sorted(all)
  print(("frame   %-28s %4d boxes on screen (of %d), zoom %.2f: %.1f / %.1f ms (min / median), max %.1f")
        :format(what, visible, m.shown, m.zoom, fmin, fmedian, fmax))
end
viewer.fit()
measure("whole graph (fit)")
viewer.zoom(0.55)
measure("zoom 0.55 (labels on)")
viewer.zoom(1.0)
measure("zoom 1.0")
-- ... and 1,000 boxes big enough for outlines: 40 chains of 25 ops side by side.
viewer.close()
bench_keep = nil
collectgarbage()
collectgarbage()
assert(viewer.open(true))
bench_keep = {}
for c = 1, 40 do
  local t = torch.randn(2, 2)
  for k = 1, 24 do t = t:tanh() end
  bench_keep[c] = t
end
viewer.wait_layout()
viewer.fit()
measure("40 chains of 25 (fit)")

-- 4. A long tape: 40,000 live nodes (a chain, every 1,000th kept), the node cap at its default.
viewer.close()
bench_keep = nil
collectgarbage()
collectgarbage()
viewer.options{history = 100}
local chain = {}
local x = torch.randn(4, 4, {requires_grad = true})
for i = 1, 20000 do
  x = (x * 1.0001):tanh()
  if i % 1000 == 0 then chain[#chain + 1] = x end
end
assert(viewer.open(true))
viewer.wait_layout()
local updates = {}
for i = 1, 5 do
  chain[#chain + 1] = x + i   -- one more node: records, the cut near the focus, boxes
  viewer.frame(1)
  updates[#updates + 1] = viewer.model().update_ms
end
local umin, umedian = sorted(updates)
local m = viewer.model()
print(("model   %d nodes on the tape, %d boxes shown (node cap): %.1f / %.1f ms per tape change (min / median)")
      :format(m.total_nodes, m.shown, umin, umedian))
chain = nil
viewer.options{history = 2000}

viewer.close()
local e0 = {}
assert(viewer.open(true))
for i = 1, 3 do for _, ms in ipairs(viewer.bench_frames(40)) do e0[#e0 + 1] = ms end end
local emin, emedian = sorted(e0)
print(("frame   %-28s %.1f / %.1f ms (min / median): the floor of a 1280x800 frame on this renderer")
      :format("empty tape", emin, emedian))
