-- f:passes(): what each pass of the freeze compiler decided, as a table (docs/freeze.md, "Pass by
-- pass"), on a function where every pass has something to do; and that the log changes nothing.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

torch.manual_seed(0)
local x = torch.randn(4, 3)
w = torch.randn(3, 3, {requires_grad = true})
local function lesson(x)
  local h = x:mm(w)
  local a = h:tanh()
  local b = h:tanh()               -- the same as a: cse
  local unused = (a * 3):sum()     -- read by nothing: dce
  local scale = torch.ones(1) * 2  -- no input: fold
  local y = (a + b):mul(scale):sigmoid():neg()   -- an elementwise chain: fuse
  local loss = y:sum()
  loss:backward()                  -- w.grad: inplace; buffers: reuse
  return loss
end

local f = torch.freeze(lesson, x)
local log = f:passes()
check.equal(f:plan():find("plan " .. log.name .. ":", 1, true), 1, "named as :plan names it")
check.equal(log.recorded_steps, 22, "recorded steps")
check.equal(log.steps, f:stats().steps, "steps after the passes")
check.equal(#log, 6, "one entry per pass")
local by_name = {}
for i, p in ipairs(log) do
  check.equal(p.name, ({"dce", "cse", "fold", "fuse", "inplace", "reuse"})[i], "pass " .. i)
  check.equal(p.on, true, p.name .. " on")
  check.equal(p.count, #p.decisions, p.name .. " count")
  by_name[p.name] = p
end
local function base(line) return (line:gsub("^.*/", "")) end   -- "test_freeze_passes.lua:12"
local function ops_of(decisions)
  local ops = {}
  for _, d in ipairs(decisions) do ops[#ops + 1] = d.op end
  return table.concat(ops, " ")
end

-- dce: the unused loss (its mul_scalar and sum, line 12), in record order
local dce = by_name.dce.decisions
check.equal(ops_of(dce), "mul_scalar sum", "dce drops the unused loss")
check.equal(base(dce[1].line), "test_freeze_passes.lua:12", "dce line")
check.equal(dce[2].why, "nothing reads it", "dce why")
check.equal(dce[1].node < dce[2].node, true, "dce in record order")

-- cse: the second tanh (line 11) reuses the first (line 10)
local cse = by_name.cse.decisions[1]
check.equal(cse.op, "tanh", "cse op")
check.equal(base(cse.line), "test_freeze_passes.lua:11", "cse line")
check.equal(cse.reuses_op, "tanh", "cse reuses")
check.equal(base(cse.reuses_line), "test_freeze_passes.lua:10", "cse reuses line")
check.equal(cse.reuses_node, cse.node - 1, "the first tanh is the node before")
check.equal(cse.text, "#" .. cse.node .. " tanh (" .. cse.line .. ") reuses #" .. cse.reuses_node ..
            " tanh's result (" .. cse.reuses_line .. ")", "cse text")

-- fold: torch.ones(1) * 2 and backward's seed, run at compile time
check.equal(ops_of(by_name.fold.decisions), "ones mul_scalar ones expand neg", "fold")
check.equal(base(by_name.fold.decisions[1].line), "test_freeze_passes.lua:13", "fold line")

-- fuse: the forward chain add, mul, sigmoid as one loop; its backward as another
local fuse = by_name.fuse.decisions
check.equal(#fuse, 2, "two fused groups")
check.equal(table.concat(fuse[1].ops, " "), "add mul sigmoid", "forward group")
check.equal(table.concat(fuse[2].ops, " "), "sigmoid_backward mul tanh_backward", "backward group")
check.equal(fuse[1].nodes[2], fuse[1].nodes[1] + 1, "group nodes in order")

-- inplace: the weight gradient's mm writes straight into w.grad
local inplace = by_name.inplace.decisions
check.equal(inplace[1].op, "mm", "inplace mm")
check.equal(inplace[1].how, "grad", "into a .grad")
check.equal(inplace[1].into, "w.grad", "into w.grad")
for i = 2, #inplace do check.equal(inplace[i].how, "input", "over an input " .. i) end

-- reuse: buffers, the values sharing each, and the memory before and after
local reuse = by_name.reuse.decisions
check.equal(#reuse, log.buffers, "one decision per buffer")
local bytes, shared = 0, 0
for _, b in ipairs(reuse) do
  bytes = bytes + b.bytes
  check.equal(#b.values, #b.nodes, "values and nodes")
  if #b.values > 1 then shared = shared + 1 end
end
check.equal(bytes, log.buffer_bytes, "buffer bytes add up")
check.equal(bytes, f:stats().buffer_bytes, "as f:stats says")
check.equal(log.unshared_bytes > log.buffer_bytes, true, "reuse saves memory")
check.equal(shared > 0, true, "some buffer is shared")

-- one pass; its text is :plan f --passes dce's
local only = f:passes("cse")
check.equal(#only, 1, "one pass")
check.equal(only[1].name, "cse", "the one asked for")
check.equal(only.text:find("dce", 1, true), nil, "text of cse only")
check.equal(only.text:find("reuses", 1, true) ~= nil, true, "cse text")

-- passes switched off: on = false, nothing decided
local g = f:with_passes{cse = false, fuse = false}
local off = g:passes()
check.equal(off[2].on, false, "cse off")
check.equal(off[2].count, 0, "cse decided nothing")
check.equal(off[4].on, false, "fuse off")
check.equal(off[1].count, 2, "dce still on")

-- bad input
check.fails("passes", "no pass is called 'dse'; the passes are dce, cse, fold, fuse, inplace, reuse", function() f:passes("dse") end)
check.fails("passes", "expected a frozen function", function() f.passes(x) end)

-- asking for the log changes nothing: the same numbers as eager
w.grad = nil
local eager = lesson(x)
local eager_grad = w.grad:clone()
w.grad = nil
local frozen = f(x)
check.close(frozen, eager, 1e-6, "loss")
check.close(w.grad, eager_grad, 1e-6, "w.grad")
print("ok")
