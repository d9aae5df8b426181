-- nn.MultiheadAttention against PyTorch (tests/oracle/make_attention_oracle.py ->
-- attention_oracle_data.lua): each case's module built by its Lua constructor and loaded with
-- PyTorch's float64 state_dict; output, attention weights and the gradients of
-- sum(output * R) + sum(weights * RW) for every parameter and input within 1e-10. Self- and
-- cross-attention, batch_first both ways, unbatched, causal, boolean (int64) and float masks,
-- key_padding_mask, kdim/vdim, need_weights and average_attn_weights. Then names, init, printing,
-- and the errors bad input gets.
local here = arg[0]:match("^(.*[/\\])") or ""
local check = dofile(here .. "check.lua")
local oracle = dofile(here .. "../oracle/attention_oracle_data.lua")

local tensor_of, close = check.entry_tensor, check.matches

for _, case in ipairs(oracle.cases) do
  local mha = load("return " .. case.lua)():double()
  local sd = {}
  for key, entry in pairs(case.state) do sd[key] = tensor_of(entry) end
  mha:load_state_dict(sd)
  local inputs = {}
  for i, entry in ipairs(case.inputs) do inputs[i] = tensor_of(entry):requires_grad_(true) end
  local q, k, v = inputs[1], inputs[2], inputs[3]
  if case.layout == "self" then k, v = q, q elseif case.layout == "kv" then v = k end
  local opts = {}
  for key, value in pairs(case.options) do opts[key] = value end
  if case.key_padding_mask then opts.key_padding_mask = tensor_of(case.key_padding_mask) end
  if case.attn_mask then opts.attn_mask = tensor_of(case.attn_mask) end
  local out, weights = mha(q, k, v, opts)
  close(out, case.output, case.name .. ": output")
  local loss = (out * tensor_of(case.R)):sum()
  if case.weights then
    close(weights, case.weights, case.name .. ": weights")
    loss = loss + (weights * tensor_of(case.RW)):sum()
  else
    check.equal(weights, nil, case.name .. ": weights with need_weights = false")
  end
  loss:backward()
  local names = {}
  for i, pair in ipairs(mha:named_parameters()) do
    names[i] = pair[1]
    assert(case.grads[pair[1]], case.name .. ": PyTorch has no parameter " .. pair[1])
    close(pair[2].grad, case.grads[pair[1]], case.name .. ": grad " .. pair[1])
  end
  local n_expected = 0
  for _ in pairs(case.grads) do n_expected = n_expected + 1 end
  check.equal(#names, n_expected, case.name .. ": parameter count")
  for i, entry in ipairs(case.input_grads) do close(inputs[i].grad, entry, case.name .. ": input grad " .. i) end
end

-- Names and printing as PyTorch's; positional forward arguments as PyTorch's order.
local mha = nn.MultiheadAttention(6, 2)
local keys = {}
for key in pairs(mha:state_dict()) do keys[#keys + 1] = key end
check.equal(table.concat(keys, " "), "in_proj_weight in_proj_bias out_proj.weight out_proj.bias", "state_dict keys")
keys = {}
for key in pairs(nn.MultiheadAttention(6, 3, {kdim = 4, vdim = 5}):state_dict()) do keys[#keys + 1] = key end
check.equal(table.concat(keys, " "), "q_proj_weight k_proj_weight v_proj_weight in_proj_bias out_proj.weight out_proj.bias",
            "state_dict keys with kdim, vdim")
check.equal(tostring(mha), oracle.repr, "print")
local x = torch.randn(3, 2, 6)
local by_name_out, by_name_w = mha(x, x, x, {need_weights = true, attn_mask = torch.ones(3, 3, {dtype = "int64"}):triu(1)})
local by_position_out, by_position_w = mha(x, x, x, nil, true, torch.ones(3, 3, {dtype = "int64"}):triu(1))
check.close(by_position_out, by_name_out, 0, "positional arguments: output")
check.close(by_position_w, by_name_w, 0, "positional arguments: weights")
local _, no_weights = mha(x, x, x, nil, false)
check.equal(no_weights, nil, "need_weights = false by position")

-- PyTorch's init: xavier uniform in_proj_weight (bound sqrt(6 / (E + 3E))), zero biases,
-- Linear's out_proj.weight (its numbers are not PyTorch's: the generators differ).
torch.manual_seed(1)
local big = nn.MultiheadAttention(64, 4)
local init = oracle.init
local max_in = big.in_proj_weight:abs():max():item()
assert(max_in <= init.in_proj_bound and max_in > 0.95 * init.in_proj_bound, "in_proj_weight bound: " .. max_in)
local max_out = big.out_proj.weight:abs():max():item()
assert(max_out <= init.out_proj_bound and max_out > 0.95 * init.out_proj_bound, "out_proj.weight bound: " .. max_out)
check.equal(big.in_proj_bias:abs():max():item(), 0, "in_proj_bias starts at zero")
check.equal(big.out_proj.bias:abs():max():item(), 0, "out_proj.bias starts at zero")
check.equal(big.in_proj_weight.dtype, "float32", "dtype")
check.equal(nn.MultiheadAttention(4, 2, {dtype = "float64"}).out_proj.weight.dtype, "float64", "dtype option")
assert(big.in_proj_weight.is_leaf and big.in_proj_weight.requires_grad, "parameters are leaves")

-- Dropout on the attention weights in training only (eval: the weights sum to 1 per query).
local dropped = nn.MultiheadAttention(4, 2, {dropout = 0.5})
local seq = torch.randn(6, 1, 4)
local _, w_train = dropped(seq, seq, seq, {average_attn_weights = false})
local _, w_eval = dropped:eval()(seq, seq, seq, {average_attn_weights = false})
check.close(w_eval:sum(4), torch.ones(1, 2, 6), 1e-6, "eval weights sum to 1")
assert((w_train:sum(4) - 1):abs():max():item() > 1e-3, "training weights are dropped out")

-- Errors name MultiheadAttention and the user's line.
local E = "MultiheadAttention"
check.fails(E, "embed_dim (6) must be divisible by num_heads (4)", function() local _ = nn.MultiheadAttention(6, 4) end)
check.fails("nn.MultiheadAttention", "unknown option 'add_bias_kv'", function() local _ = nn.MultiheadAttention(6, 2, {add_bias_kv = true}) end)
check.fails(E, "query must be 3-D (batched) or 2-D (unbatched)", function() local _ = mha(torch.randn(6), x, x) end)
check.fails(E, "must be 3-D as the query", function() local _ = mha(x, torch.randn(3, 6), x) end)
check.fails(E, "must end in embed_dim 6", function() local _ = mha(torch.randn(3, 2, 5), x, x) end)
check.fails(E, "must have the same batch size", function() local _ = mha(x, torch.randn(4, 3, 6), torch.randn(4, 3, 6)) end)
check.fails(E, "attn_mask must be [3,3]", function() local _ = mha(x, x, x, {attn_mask = torch.zeros(3, 4)}) end)
check.fails(E, "attn_mask must be [4,3,3]", function() local _ = mha(x, x, x, {attn_mask = torch.zeros(2, 3, 3)}) end)
check.fails(E, "key_padding_mask must be [2, 3]", function() local _ = mha(x, x, x, {key_padding_mask = torch.zeros(3, 2)}) end)
check.fails(E, "key_padding_mask must be 2-D", function() local _ = mha(x, x, x, {key_padding_mask = torch.zeros(3)}) end)
check.fails(E, "float mask of 0s and 1s", function() local _ = mha(x, x, x, {attn_mask = torch.ones(3, 3):triu(1)}) end)
check.fails(E, "give it as int64", function() local _ = mha(x, x, x, {key_padding_mask = torch.ones(2, 3)}) end)
check.fails("mha:forward", "unknown option 'causal' (did you mean 'is_causal'?", function() local _ = mha(x, x, x, {causal = true}) end)
check.fails(E, "need_weights must be true or false", function() local _ = mha(x, x, x, nil, 1) end)
print("test_attention_oracle: ok")
