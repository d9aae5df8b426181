-- viewer_long_tape.lua: the viewer open on the long-loop RNN unroll (a 50,000-step graph,
-- frames <= 16 ms; the window draws a window of the tape, model.h TapeWindow).
--   xvfb-run -a -s "-screen 0 1280x1024x24" tapedeck bench/viewer_long_tape.lua [steps=50000] [shot.png]
-- Frames while the graph grows are the ones the node hook draws (~30 a second); "total" includes the
-- model's update before the frame (records of the tape window, the view), "draw" is drawing alone.
local steps = tonumber(arg and arg[1]) or 50000
local shot = arg and arg[2]

local function stats(values)
  local sorted, sum = {}, 0
  for i, v in ipairs(values) do sorted[i] = v; sum = sum + v end
  table.sort(sorted)
  if #sorted == 0 then return "no frames" end
  return ("%d frames, mean %.1f ms, median %.1f, max %.1f"):format(#sorted, sum / #sorted,
    sorted[(#sorted + 1) // 2], sorted[#sorted])
end

local ok, message = viewer.open(true)
if not ok then print("skipped: " .. message) return end
torch.manual_seed(0)
local W_h = (torch.randn(20, 20) * 0.1):requires_grad_(true)
local W_x = torch.randn(20, 10, {requires_grad = true})
local xs = torch.randn(steps, 10)
local h = torch.zeros(1, 20)
viewer.frame(3)
local before = #viewer.frame_times().total
local t0 = torch.perf_counter()
for t = 1, steps do h = (torch.mm(W_h, h:t()) + torch.mm(W_x, xs:narrow(1, t, 1):t())):tanh():t() end
local loss = h:sum()
loss:backward()
local seconds = torch.perf_counter() - t0
local times = viewer.frame_times()
local function tail(list, from) local out = {} for i = from + 1, #list do out[#out + 1] = list[i] end return out end
local grown = math.min(#times.total, 240)
print(("T=%d: %d nodes on the tape, forward + backward %.2f s with the window open (%.1f us/step)")
      :format(steps, #torch.tape(), seconds, seconds / steps * 1e6))
print("  growing, total: " .. stats(tail(times.total, #times.total - math.min(grown, #times.total - before))))
print("  growing, draw:  " .. stats(tail(times.draw, #times.draw - math.min(grown, #times.draw - before))))
local w = viewer.window()
print(("  window: nodes #%d..#%d of %d (%d copied)"):format(w.first, w.last, w.live, w.nodes))
viewer.wait_layout(60)
viewer.bench_frames(5)
local still = viewer.bench_frames(60)
print("  still (layout done): " .. stats(still))
local m = viewer.model()
print(("  model: %d records, %d boxes shown, update %.1f ms, layout %.0f ms"):format(m.records, m.shown, m.update_ms, m.layout_seconds * 1000))
-- The model's work per change, the tape's length aside: every record of the window new (as while
-- the graph grows), by moving the window back and forth.
local moves = {}
for i = 1, 10 do
  local t = torch.perf_counter()
  viewer.window(i % 2 == 1 and "older" or "newest")
  moves[#moves + 1] = (torch.perf_counter() - t) * 1000
  viewer.frame(1)
end
table.sort(moves)
print(("  model rebuilt for a new window (records, names, view): %.1f / %.1f ms (min / median)"):format(moves[1], moves[5]))
if shot then viewer.screenshot(shot) print("  wrote " .. shot) end
