-- The names a PyTorch user reaches for first: torch.nn / torch.optim / torch.nn.functional,
-- dtype constants, torch.device and the device option, x:to(...) in its PyTorch forms, and the
-- elementwise functions registered from the op table (x:f() and torch.f(x), nothing else accepted).
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

-- namespaces: the same tables as the globals
check.equal(torch.nn, nn, "torch.nn")
check.equal(torch.optim, optim, "torch.optim")
check.equal(torch.nn.functional, F, "torch.nn.functional")
local lin = torch.nn.Linear(3, 2)
local opt = torch.optim.Adam(lin:parameters(), {lr = 0.01})
local loss = torch.nn.functional.mse_loss(lin(torch.ones(4, 3)), torch.zeros(4, 2))
loss:backward()
opt:step()

-- dtype constants are the dtype names
check.equal(torch.float32, "float32")
check.equal(torch.float, "float32")
check.equal(torch.float64, "float64")
check.equal(torch.double, "float64")
check.equal(torch.int64, "int64")
check.equal(torch.long, "int64")
local x = torch.zeros(2, 3, {dtype = torch.float64})
check.equal(x.dtype, torch.float64)

-- devices: "cpu" everywhere PyTorch takes a device; "cuda" where there is a usable GPU (the
-- CUDA tests: tests/cuda/), else a clear error giving the reason
check.equal(torch.device("cpu"), "cpu")
check.equal(x.device, torch.device("cpu"))
check.equal(torch.ones(2, {device = "cpu"}).device, "cpu")
check.equal(torch.randn(2, {device = torch.device("cpu"), dtype = torch.float64}).dtype, "float64")
check.equal(torch.device("cuda"), "cuda")
if not torch.cuda.is_available() then
  local reason = torch.cuda.why_unavailable()
  check.fails("zeros", reason, function() return torch.zeros(2, {device = "cuda"}) end)
  check.fails("cuda", reason, function() return x:cuda() end)
  check.fails("to", reason, function() return x:to("cuda") end)
  check.equal(torch.cuda.device_count(), 0)
  check.equal(torch.cuda.memory_allocated(), 0)
end
check.equal(x.is_cuda, false)
check.equal(x:cpu(), x)
check.fails("device", "unknown device 'tpu'", function() return torch.device("tpu") end)
check.fails("torch.zeros", "unknown option 'devcie' (did you mean 'device'?", function() return torch.zeros(2, {devcie = "cpu"}) end)
check.fails("zeros", "argument 2: unknown device 'tpu'", function() return torch.zeros(2, {device = "tpu"}) end)

-- x:to(...): a dtype, a device, both, an options table, another tensor
check.equal(x:to("cpu"), x)
check.equal(x:to(torch.float32).dtype, "float32")
check.equal(x:to("cpu", torch.int64).dtype, "int64")
check.equal(x:to({dtype = torch.float32}).dtype, "float32")
check.equal(x:to(torch.zeros(1, {dtype = "int64"})).dtype, "int64")
check.equal(x:cpu(), x)
check.fails("to", "a dtype (float32, float64, int64) or a device (cpu, cuda), got float16", function() return x:to("float16") end)
check.fails("x:to", "unknown option 'requires_grad' (it takes dtype, device)", function() return x:to({requires_grad = true}) end)

-- elementwise functions from the op table: both spellings, and an extra argument is an error
local v = torch.tensor({0.25, -1.5, 2.75})
for _, name in ipairs({"sin", "cos", "expm1", "square", "floor", "ceil", "round", "trunc", "sign", "abs", "neg"}) do
  check.close(torch[name](v), v[name](v), 0, name)
end
check.close(v:floor(), {0, -2, 2}, 0, "floor")
check.close(torch.tensor({0.5, 1.5, 2.5, -0.5}):round(), {0, 2, 2, 0}, 0, "round: halves to even")
check.equal(torch.tensor({-3, 4}, {dtype = "int64"}):square().dtype, "int64")
check.fails("sin", "sin takes only the tensor, got number", function() return v:sin(2) end)
check.fails("floor", "tensor expected, got string", function() return torch.floor("x") end)

-- torch.ops(): the op table as data
local by_name = {}
for _, op in ipairs(torch.ops()) do by_name[op.name] = op end
check.equal(by_name.sin.from_table, true, "sin from the table")
check.equal(by_name.sin.math, "y = sin x")
check.equal(by_name.tanh_backward.internal, true, "tanh_backward internal")
check.equal(by_name.floor.differentiable, true, "floor has a (zero) gradient, as PyTorch")

-- every op the table does not mark internal is reachable by its name from Lua; the F.name ones
-- (PyTorch has them in torch.nn.functional only) only there
local t = torch.ones(1)
for _, op in ipairs(torch.ops()) do
  if op.functional then
    check.equal(type(F[op.name]), "function", "op " .. op.name .. " is F." .. op.name)
    check.equal(torch[op.name], nil, "op " .. op.name .. " is not torch." .. op.name)
  elseif not op.internal and op.name ~= "to_device" then   -- to_device is x:to(device), x:cuda(), x:cpu()
    local method = pcall(function() return t[op.name] end)   -- an unknown field is an error
    check.equal(torch[op.name] ~= nil or method, true, "op " .. op.name .. " has a Lua name")
  end
end
check.equal(type(t.to), "function", "x:to")

-- PyTorch's fields and spellings: x.T, x.mT, x.H, x.mH are views as PyTorch's (real tensors: H is
-- T); a name tensors do not have is an error naming it, with tapedeck's spelling of a PyTorch one
local m = torch.arange(1, 7):reshape(2, 3)
check.close(m.T, m:t(), 0, "x.T of a matrix is x:t()")
check.close(m.mT, m:t(), 0, "x.mT of a matrix")
check.close(m.H, m:t(), 0, "x.H of a real matrix")
local b3 = torch.arange(1, 25):reshape(2, 3, 4)
check.equal(tostring(b3.T.shape), "[4,3,2]", "x.T reverses every dim")
check.close(b3.T, b3:permute(3, 2, 1), 0, "x.T is permute(n, ..., 1)")
check.close(b3.mT, b3:transpose(2, 3), 0, "x.mT swaps the last two dims")
check.close(b3.mH, b3:transpose(2, 3), 0, "x.mH of a real batch")
local v = torch.tensor({1, 2, 3})
check.equal(rawequal(v.T, v), true, "x.T of a vector is x, as PyTorch")
check.equal(tostring(torch.tensor(5).mT.shape), "[]", "x.mT of a 0-d tensor is itself")
check.fails("mT", "x.mT is only for matrices or batches of them, got a 1-d tensor", function() return v.mT end)
check.fails("mH", "x.mH is only for matrices or batches of them, got a 1-d tensor", function() return v.mH end)
local batch_h = "x.H is only for matrices (2-d tensors), got a 3-d tensor; for a batch of matrices use x.mH"
check.fails("H", batch_h, function() return b3.H end)
local leaf = torch.randn(3, 4, {requires_grad = true})
local weights = torch.randn(4, 3)
local product = leaf.T * weights
product:sum():backward()
check.close(leaf.grad, weights:t(), 0, "x.T is a view the gradient flows through")
m.T[1][2] = 100
check.equal(m[2][1]:item(), 100, "x.T shares x's storage")
local numpy_hint = "a tensor has no field or method 'numpy' (in tapedeck: x:totable() gives the values as a Lua table, " ..
                   "torch.save_npy(x, path) writes a .npy file NumPy reads)"
check.fails("numpy", numpy_hint, function() return m:numpy() end)
check.fails("astype", "(in tapedeck: x:to(dtype)", function() return m:astype("float64") end)
local gard_hint = "a tensor has no field or method 'requires_gard' (did you mean x.requires_grad?)"
check.fails("requires_gard", gard_hint, function() return leaf.requires_gard end)
check.fails("sum_", "x:sum,", function() return m:sum_() end)
check.fails("silu", "(F.silu(x): PyTorch has it in torch.nn.functional only)", function() return m:silu() end)
check.fails("no_such_field", "a tensor has no field or method 'no_such_field'", function() return m.no_such_field end)

-- sign and the rounding ops pass a zero gradient, as PyTorch (not "no gradient")
local w = torch.tensor({0.3, -1.7}, {requires_grad = true})
local y = w:floor() + w:sign() + w:round() + w:trunc() + w:ceil() + w * 2
y:sum():backward()
check.close(w.grad, {2, 2}, 0, "only w * 2 contributes")

-- conveniences: ndim, nelement, tolist, int, bool, type_as, new_*
local c = torch.ones(2, 3)
check.equal(c.ndim, 2); check.equal(c:nelement(), 6); check.equal(c:tolist()[2][3], 1.0)
check.equal(c:int().dtype, "int64", "int() is int64 (no int32)")
check.close(torch.tensor({0, 2, -1}):bool(), {0, 1, 1}, 0, "bool(): 1 where non-zero")
check.equal(c:type_as(torch.zeros(1, {dtype = "float64"})).dtype, "float64")
check.equal(c:double():new_zeros(4).dtype, "float64", "new_zeros keeps x's dtype")
check.close(c:new_full({2}, 7), {7, 7}, 0); check.close(c:new_ones(1, 2), {{1, 1}}, 0)
check.equal(c:new_zeros({2}, {dtype = "int64"}).dtype, "int64")

-- torch.autograd.grad and backward{create_graph = true}: second derivatives (values: test_oracle)
local p = torch.tensor({1.5, -0.5}, {requires_grad = true, dtype = "float64"})
local first = torch.autograd.grad((p ^ 3):sum(), p, {create_graph = true})
check.close(first, {6.75, 0.75}, 1e-12); check.equal(p.grad, nil, "autograd.grad leaves .grad alone")
check.close(torch.autograd.grad(first:sum(), p), {9, -3}, 1e-12, "6x")
local q = torch.tensor({2.0}, {requires_grad = true})
local a1, a2 = torch.autograd.grad({(p * 2):sum(), (q * 3):sum()}, {p, q})
check.close(a1, {2, 2}, 0); check.close(a2, {3}, 0)
check.fails("grad", "was not used", function() return torch.autograd.grad((p * 2):sum(), {p, q}) end)
local _, none = torch.autograd.grad((p * 2):sum(), {p, q}, {allow_unused = true})
check.equal(none, nil, "allow_unused gives nil")
check.fails("torch.autograd.grad", "unknown option 'create'", function() return torch.autograd.grad(p:sum(), p, {create = true}) end)
check.fails("grad", "does not require grad", function() return torch.autograd.grad(p:sum(), torch.ones(2)) end)
local r = (p:sin() * p):sum()
r:backward{create_graph = true}
check.equal(p.grad.requires_grad, true, "create_graph: the gradient has a graph")
check.fails("x:backward", "unknown option 'graph'", function() r:backward({graph = true}) end)
