-- freeze of a long loop (rule 13 of docs/design.md): the lecture's RNN cell unrolled 20,000 steps
-- with backward freezes in memory linear in the steps, and its replay gives what eager gives.
-- A regression guard on memory, not a timing test: freeze was quadratic once (5,000 steps took
-- 31 s and 10.9 GB). The bounds (docs/freeze.md, "Cost"):
--   peak RSS of the freeze above the process's before it <= 420 bytes per recorded node (the
--   eager run being recorded, its graph alive; ~340 today, since the recording packs its steps
--   and groups as it goes; ~440 before that, ~500 before a step's value lists took 16 bytes and
--   the recording's arrays were mapped (big_array.h), ~650 before torch.freeze let the recorded
--   run's graph go before compiling), and with the plan's first call (its run-time state) <= 440
--   (~355 today, ~440 before, ~540 before that, ~760 before that, ~1,150 before the recording and
--   the plan were made smaller)
--   the plan's own buffers (reused) take <= 160 bytes per step (what backward reads: 80)
-- Then two loops that once compiled in quadratic time (an in-place chain, a guard per step).
-- TAPEDECK_TEST_UNROLL_STEPS sets the steps; the sanitizer build runs 2,000 and skips the RSS bound
-- (AddressSanitizer's shadow memory and quarantine are not tapedeck's).
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

local steps = tonumber(os.getenv("TAPEDECK_TEST_UNROLL_STEPS") or "") or 20000
local check_rss = os.getenv("TAPEDECK_TEST_SKIP_RSS") == nil

local peak_rss = check.peak_rss_bytes

torch.manual_seed(15)
local W_h = (torch.randn(20, 20) * 0.1):requires_grad_(true)
local W_x = torch.randn(20, 10, {requires_grad = true})
local xs = torch.randn(steps, 10)

local function unroll(W_h, W_x, xs)
  local h = torch.zeros(1, 20)
  for t = 1, steps do h = (torch.mm(W_h, h:t()) + torch.mm(W_x, xs:narrow(1, t, 1):t())):tanh():t() end
  h:sum():backward()
  return h
end

collectgarbage()
local rss_before = peak_rss()
local f = torch.freeze(unroll, W_h, W_x, xs)
local rss_after = peak_rss()
local stats = f:stats()
print(("%d steps: %d recorded nodes, %d plan steps, plan buffers %d bytes"):format(
  steps, stats.recorded_nodes, stats.steps, stats.buffer_bytes))
assert(stats.recorded_nodes >= 16 * steps, "every step of the loop was recorded (forward and backward)")
assert(stats.steps < stats.recorded_nodes, "the passes dropped or fused steps")
-- Buffer reuse: what backward reads of each step (its state h, 80 bytes) stays, the rest of the
-- step's values share a few buffers.
assert(stats.buffer_bytes <= 160 * steps,
       ("the plan's buffers take %d bytes for %d steps (bound 160 per step)"):format(stats.buffer_bytes, steps))
if check_rss and rss_before and rss_after and steps >= 5000 then   -- smaller runs measure the allocator
  local per_node = (rss_after - rss_before) / stats.recorded_nodes
  print(("freeze peak RSS %.0f MB above the %.0f MB before it: %.0f bytes per recorded node"):format(
    (rss_after - rss_before) / 2 ^ 20, rss_before / 2 ^ 20, per_node))
  assert(per_node < 420, ("freeze took %.0f bytes of peak RSS per recorded node (bound 420)"):format(per_node))
end

-- The replay gives eager's answer: the last state and both gradients.
W_h.grad, W_x.grad = nil, nil
local h_frozen = f(W_h, W_x, xs)
local rss_first_call = peak_rss()
if check_rss and rss_before and rss_first_call and steps >= 5000 then
  local per_node = (rss_first_call - rss_before) / stats.recorded_nodes
  print(("with the first call, peak RSS %.0f MB above: %.0f bytes per recorded node"):format(
    (rss_first_call - rss_before) / 2 ^ 20, per_node))
  assert(per_node < 440, ("freeze and the plan's first call took %.0f bytes of peak RSS per recorded node (bound 440)"):format(per_node))
end
local gh_frozen, gx_frozen = W_h.grad:clone(), W_x.grad:clone()
check.equal(f:stats().replays, 1, "the call replayed the plan")
W_h.grad, W_x.grad = nil, nil
local h_eager = unroll(W_h, W_x, xs)
check.close(h_frozen, h_eager, 1e-5, "the replay's last state")
check.close(gh_frozen, W_h.grad, 1e-5, "the replay's gradient of W_h")
check.close(gx_frozen, W_x.grad, 1e-5, "the replay's gradient of W_x")

-- Two loops that made passes compare every step with every other (rule 13 of docs/design.md): a chain of
-- in-place adds (each value an alias of the one before: a root was found by walking the chain)
-- and a comparison guard per step (each guard was placed by scanning the steps before it). At
-- 20,000 steps each compiled in ~11 s; now in well under a second. The bound is generous.
local function compile_seconds(name, fn, ...)
  local g = torch.freeze(fn, ...)
  local s = g:stats()
  print(("%s: %d recorded nodes, %d guards, compile %.3f s"):format(name, s.recorded_nodes, s.guards, s.compile_seconds))
  assert(s.compile_seconds < 3, ("%s: compile took %.1f s for %d steps"):format(name, s.compile_seconds, steps))
  return g
end
local w = torch.randn(1, 4, {requires_grad = true})
local function add_chain(w)
  local h = torch.zeros(1, 4)
  for _ = 1, steps do h:add_(w) end
  return h * 1
end
local chain = compile_seconds("in-place chain", add_chain, w)
check.close(chain(w), add_chain(w), 1e-4, "the in-place chain's replay")
local function guarded(w)
  local h = torch.zeros(1, 4)
  for _ = 1, steps do
    h = (h + w):tanh()
    if h:sum() > 100 then h = h * 0 end
  end
  return h
end
local branches = compile_seconds("a guard per step", guarded, w)
check.close(branches(w), guarded(w), 1e-6, "the guarded loop's replay")
