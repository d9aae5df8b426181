-- torch.tape() while garbage tensors are pending: building the records allocates Lua tables, the
-- collector finishes its cycle inside the loop and finalizes the dropped tensors, whose nodes are
-- destroyed; the loop then reads the destroyed nodes. ASan sees it when the node is a
-- torch.Function's (Node::name() reads the freed LuaFunction: heap-use-after-free from
-- tapedeck_push_node_record, lua_tensor.cpp push_records); for other nodes the free list hides
-- the stale read. torch.graph(t) has the same loop.
local Double = torch.Function{name = "Double",
  forward = function(ctx, x) return x * 2 end,
  backward = function(ctx, g) return g * 2 end}
local live = {}
for i = 1, 2000 do live[i] = torch.randn(2) end       -- many records: the loop allocates a lot
for round = 1, 20 do
  local garbage = {}
  for i = 1, 300 do garbage[i] = Double(torch.randn(2)) end   -- newest nodes: last in the tape
  garbage = nil                                                -- pending, not yet collected
  local records = torch.tape()
  for _, r in ipairs(records) do local _ = r.op end
end
print("no crash")
