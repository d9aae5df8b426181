-- Bad input raises a Lua error (catchable with pcall) whose message names the op and ends with
-- this script's file:line; the script, the tensors and the tape carry on after each one.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

local a = torch.ones(20, 20)
local b = torch.ones(10, 1)
local w = torch.tensor({1, 2}, {requires_grad = true})

-- shape mismatches: mm names both shapes; broadcasting, reshape, cat, copy_
local message = check.fails("mm", "shapes [20,20] and [10,1] do not match", function() torch.mm(a, b) end)
assert(message:match("^mm: shapes %[20,20%] and %[10,1%] do not match %(.*test_errors%.lua:%d+%)$"), message)
check.fails("mm", "do not match", function() return a:mm(b) end)
check.fails("mm", "2-d", function() return torch.mm(torch.ones(2), torch.ones(2)) end)
check.fails("add", "cannot be broadcast", function() return torch.ones(2) + torch.ones(3) end)
check.fails("mul", "cannot be broadcast", function() return torch.ones(2, 3) * torch.ones(2) end)
check.fails("reshape", "[2,2]", function() return torch.ones(2, 2):reshape(3) end)
check.fails("cat", "", function() return torch.cat({torch.ones(2, 2), torch.ones(3, 3)}) end)
check.fails("copy_", "", function() torch.ones(2):copy_(torch.ones(3)) end)
check.fails("bmm", "", function() return torch.bmm(torch.ones(2, 2), torch.ones(2, 2)) end)

-- backward on a non-scalar without a gradient, on a tensor that needs no grad, with a wrong gradient
check.fails("backward", "single element", function() (w * 2):backward() end)
check.fails("backward", "does not require grad", function() torch.ones(1):sum():backward() end)
check.fails("backward", "shape", function() (w * 2):backward(torch.ones(3)) end)

-- wrong argument types
check.fails("mm", "argument 2: tensor expected, got number", function() return a:mm(3) end)
check.fails("mm", "argument 2: tensor expected, got no value", function() return a:mm() end)
check.fails("tensor", "argument 1", function() return torch.tensor("x") end)
check.fails("tensor", "ragged", function() return torch.tensor({{1, 2}, {3}}) end)
check.fails("tensor", "expected a number", function() return torch.tensor({1, "two"}) end)
check.fails("add", "string", function() return torch.ones(2) + "a" end)
check.fails("sum", "dim must be an integer", function() return torch.ones(2):sum("x") end)
check.fails("sum", "dim must be an integer", function() return torch.ones(2):sum(1.5) end)
check.fails("zeros", "integer", function() return torch.zeros(2.5) end)
check.fails("zeros", "negative", function() return torch.zeros(-1) end)
check.fails("gather", "int64", function() return torch.ones(2, 2):gather(1, torch.ones(2, 2)) end)
check.fails("cat", "table", function() return torch.cat(torch.ones(2)) end)
check.fails("graphviz", "file name", function() torch.graphviz(w) end)
check.fails("item", "exactly one", function() return torch.ones(2):item() end)
check.fails("manual_seed", "integer", function() torch.manual_seed("x") end)

-- unknown method or field: a tensor's is an error naming it (never a nil that fails later); a
-- missing torch function is nil, as Lua's tables give (the REPL and script runner add a "did you
-- mean" hint to the error of calling it: tests/repl/bad_input)
check.fails("foo", "a tensor has no field or method 'foo'", function() return torch.ones(2):foo() end)
check.fails("nosuchfield", "a tensor has no field or method 'nosuchfield'", function() return torch.ones(2).nosuchfield end)
check.equal(torch.no_such_function, nil, "a missing torch function is nil")
check.fails("tensor", "cannot set field 'foo'", function() torch.ones(2).foo = 1 end)

-- dims out of range (1-based: 0 is out, -ndim..ndim otherwise)
check.fails("sum", "dim 3 out of range", function() return torch.ones(2, 2):sum(3) end)
check.fails("softmax", "dim 0 out of range", function() return torch.ones(2, 2):softmax(0) end)
check.fails("size", "dim -3 out of range", function() return torch.ones(2, 2):size(-3) end)
check.fails("transpose", "out of range", function() return torch.ones(2, 2):transpose(1, 3) end)
check.fails("unsqueeze", "out of range", function() return torch.ones(2):unsqueeze(3) end)
check.fails("narrow", "out of range", function() return torch.ones(2, 2):narrow(1, 2, 2) end)
check.fails("max", "out of range", function() return torch.ones(2):max(2) end)
check.fails("gather", "out of range", function() return torch.ones(2):gather(2, torch.arange(2)) end)

-- unknown option keys and values
check.fails("torch.ones", "unknown option 'requires_grd' (did you mean 'requires_grad'?", function() return torch.ones(2, {requires_grd = true}) end)
check.fails("torch.tensor", "unknown option 'dtpye'", function() return torch.tensor({1}, {dtpye = "float64"}) end)
check.fails("zeros", "unknown dtype 'float16'", function() return torch.zeros(2, {dtype = "float16"}) end)
check.fails("x:clamp", "unknown option 'mn'", function() return torch.ones(2):clamp{mn = 0} end)
check.fails("clamp", "give min, max or both", function() return torch.ones(2):clamp() end)
check.fails("to", "dtype", function() return torch.ones(2):to("half") end)

-- an error in the middle of a chain leaves the operands intact and the tape usable
collectgarbage()   -- (count only live nodes: a collection between here and the check would free earlier ones)
local before = #torch.tape()
pcall(function() return (w * 2):mm(b) end)
check.close(w, {1, 2})
local y = (w * w):sum()
y:backward()
check.close(w.grad, {2, 4})
assert(#torch.tape() >= before, "the tape is still there")

-- errors raised by Lua itself on tensors are Lua's usual ones
ok, message = pcall(function() return torch.ones(2) .. "x" end)
assert(not ok and message:find("concatenate", 1, true), message)
ok, message = pcall(function() return torch.ones(2) < torch.ones(2) end)
assert(not ok and message:find("compare", 1, true), message)

-- messages call a tensor "tensor", not "userdata"
do
  local _, message = pcall(function() return torch.ones(2) + "a" end)
  assert(not message:find("userdata", 1, true) and message:find("tensor", 1, true), message)
  _, message = pcall(torch.cat, torch.ones(2))
  assert(not message:find("userdata", 1, true), message)
end

print("test_errors: ok")
