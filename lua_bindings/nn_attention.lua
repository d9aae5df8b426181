-- nn_attention.lua: nn.MultiheadAttention, PyTorch's, written over linear, views (reshape,
-- transpose), bmm, softmax and masked_fill, so each step is a node the debugger can stop at.
-- Embedded in tapedeck and loaded after nn_layers.lua (its out_proj is a Linear), into the same `nn`.
local nn = require "nn"
local errors = require "tapedeck.errors"
local fail, describe = errors.fail, errors.describe
local helpers = nn._helpers
local check_integer, check_options, named, check_dtype = helpers.check_integer, helpers.check_options, helpers.named, helpers.check_dtype
local uniform_parameter, parse_args, check_tensor = helpers.uniform_parameter, helpers.parse_args, helpers.check_tensor
local check_number, check_boolean = helpers.check_number, helpers.check_boolean
local declare_options, place_on_device = helpers.declare_options, helpers.place_on_device
local Module, F = nn.Module, nn.functional

-- PyTorch's out_proj is this Linear subclass (its name is what print(model) shows).
local NonDynamicallyQuantizableLinear = nn.Linear:extend("NonDynamicallyQuantizableLinear")

-- Xavier (Glorot) uniform of a [fan_out, fan_in] weight: bound sqrt(6 / (fan_in + fan_out)).
local function xavier_uniform_parameter(fan_out, fan_in, dtype)
  return uniform_parameter({fan_out, fan_in}, math.sqrt(6 / (fan_in + fan_out)), dtype)
end

-- nn.MultiheadAttention(embed_dim, num_heads [, {dropout = 0, bias = true, batch_first = false,
-- kdim = embed_dim, vdim = embed_dim, dtype}]): PyTorch's parameters and names: in_proj_weight
-- [3E, E] and in_proj_bias [3E] (or q_proj_weight, k_proj_weight, v_proj_weight when kdim or vdim
-- differ from E), out_proj.weight and out_proj.bias; PyTorch's init (xavier uniform for the input
-- projections, zeros for the biases, Linear's for out_proj.weight).
nn.MultiheadAttention = Module:extend("MultiheadAttention")
local MHA_OPTIONS = declare_options("nn.MultiheadAttention", {"dropout", "bias", "kdim", "vdim", "batch_first", "device",
                                                              "dtype"})
local MHA_FORWARD_OPTIONS = declare_options("mha:forward", {"key_padding_mask", "need_weights", "attn_mask",
                                                            "average_attn_weights", "is_causal"})
function nn.MultiheadAttention:init(embed_dim, num_heads, opts)
  local class = "MultiheadAttention"
  embed_dim = check_integer(class, "embed_dim", embed_dim, 1)
  num_heads = check_integer(class, "num_heads", num_heads, 1)
  opts = check_options(MHA_OPTIONS, opts, "{batch_first = true}")
  local dtype = check_dtype(class, opts.dtype, opts.device)
  if embed_dim % num_heads ~= 0 then
    fail(string.format("%s: embed_dim (%d) must be divisible by num_heads (%d)", class, embed_dim, num_heads))
  end
  self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
  self.kdim = opts.kdim == nil and embed_dim or check_integer(class, "kdim", opts.kdim, 1)
  self.vdim = opts.vdim == nil and embed_dim or check_integer(class, "vdim", opts.vdim, 1)
  self.dropout = check_number(class, "dropout", opts.dropout, 0.0)
  if self.dropout < 0 or self.dropout > 1 then fail(class .. ": dropout must be in [0, 1], got " .. describe(self.dropout)) end
  self.batch_first = check_boolean(class, "batch_first", opts.batch_first, false)
  local bias = check_boolean(class, "bias", opts.bias, true)
  self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
  named(class, function()
    if self._qkv_same_embed_dim then
      self.in_proj_weight = xavier_uniform_parameter(3 * embed_dim, embed_dim, dtype)
    else
      self.q_proj_weight = xavier_uniform_parameter(embed_dim, embed_dim, dtype)
      self.k_proj_weight = xavier_uniform_parameter(embed_dim, self.kdim, dtype)
      self.v_proj_weight = xavier_uniform_parameter(embed_dim, self.vdim, dtype)
    end
    if bias then self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim, {dtype = dtype})) end
    self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, {bias = bias, dtype = dtype})
    if bias then torch.no_grad(function() self.out_proj.bias:zero_() end) end
  end)
  for _, key in ipairs({"in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias"}) do
    if self[key] == nil then self:register_parameter(key, nil) end   -- PyTorch's None: reads nil
  end
  place_on_device(self, opts.device)
end

-- A mask as the float tensor added to the attention scores, PyTorch's two kinds: a boolean mask
-- (true: may not attend) gives -inf where set, 0 elsewhere; a float mask is added as it is. There
-- is no bool dtype here, so an int64 mask is the boolean kind (non-zero: true) and a float mask the
-- additive kind. A float mask of only 0s and 1s is refused: that is a boolean mask made by a
-- comparison (float 0/1), which added as it is would silently attend everywhere.
local function additive_mask(fname, what, mask, dtype)
  if mask.dtype == "int64" then
    return torch.zeros(mask:size(), {dtype = dtype, device = mask.device}):masked_fill(mask, -math.huge)
  end
  local zeros_and_ones = (mask:eq(0) + mask:eq(1)):min():item() == 1 and mask:max():item() == 1
  if zeros_and_ones then
    fail(string.format("%s: %s is a float mask of 0s and 1s, which would be added to the scores (PyTorch's float mask); " ..
                       "for a boolean mask (1: may not attend) give it as int64: mask:long()", fname, what))
  end
  return mask.dtype == dtype and mask or mask:to(dtype)
end

local function shape_text(t) return tostring(t.shape) end

-- Checks the ranks PyTorch accepts (_mha_shape_check); returns whether the input is batched.
local function attention_is_batched(fname, query, key, value, key_padding_mask, attn_mask)
  local rank = query:dim()
  if rank ~= 2 and rank ~= 3 then
    fail(string.format("%s: query must be 3-D (batched) or 2-D (unbatched), got %s", fname, shape_text(query)))
  end
  if key:dim() ~= rank or value:dim() ~= rank then
    fail(string.format("%s: key %s and value %s must be %d-D as the query %s", fname, shape_text(key), shape_text(value), rank,
                       shape_text(query)))
  end
  if key_padding_mask and key_padding_mask:dim() ~= rank - 1 then
    fail(string.format("%s: key_padding_mask must be %d-D for a %d-D query, got %s", fname, rank - 1, rank,
                       shape_text(key_padding_mask)))
  end
  if attn_mask and attn_mask:dim() ~= 2 and attn_mask:dim() ~= 3 then
    fail(string.format("%s: attn_mask must be 2-D or 3-D, got %s", fname, shape_text(attn_mask)))
  end
  return rank == 3
end

-- The input projections: q, k, v as [L or S, N, E]. Self-attention (one tensor for all three)
-- makes one linear with the packed weight and chunks its result, as PyTorch.
function nn.MultiheadAttention:project_inputs(query, key, value)
  local bq, bk, bv
  if self.in_proj_bias then bq, bk, bv = table.unpack(self.in_proj_bias:chunk(3)) end
  if not self._qkv_same_embed_dim then
    return torch.linear(query, self.q_proj_weight, bq), torch.linear(key, self.k_proj_weight, bk),
           torch.linear(value, self.v_proj_weight, bv)
  end
  if query == key and key == value then
    return table.unpack(torch.linear(query, self.in_proj_weight, self.in_proj_bias):chunk(3, -1))
  end
  local wq, wk, wv = table.unpack(self.in_proj_weight:chunk(3))
  return torch.linear(query, wq, bq), torch.linear(key, wk, bk), torch.linear(value, wv, bv)
end

-- The one mask added to the [N * heads, L, S] scores (nil when there is none): attn_mask [L, S]
-- or [N * heads, L, S], plus key_padding_mask [N, S] on every head and query; is_causal without
-- an attn_mask is the causal mask (no key after the query).
function nn.MultiheadAttention:merged_mask(fname, attn_mask, key_padding_mask, is_causal, N, L, S, dtype)
  local H = self.num_heads
  local mask
  if attn_mask then
    local expected = attn_mask:dim() == 2 and {L, S} or {N * H, L, S}
    if table.concat(attn_mask:size(), ",") ~= table.concat(expected, ",") then
      fail(string.format("%s: attn_mask must be [%s] (%s), got %s", fname, table.concat(expected, ","),
                         attn_mask:dim() == 2 and "target length, source length" or "batch * num_heads, target, source",
                         shape_text(attn_mask)))
    end
    mask = additive_mask(fname, "attn_mask", attn_mask, dtype)
    if attn_mask:dim() == 2 then mask = mask:unsqueeze(1) end
  elseif is_causal then
    local device = self.out_proj.weight.device
    mask = torch.zeros(1, L, S, {dtype = dtype, device = device}):masked_fill(
      torch.ones(1, L, S, {device = device}):triu(1), -math.huge)
  end
  if key_padding_mask then
    if key_padding_mask:size(1) ~= N or key_padding_mask:size(2) ~= S then
      fail(string.format("%s: key_padding_mask must be [%d, %d] (batch, source length), got %s", fname, N, S,
                         shape_text(key_padding_mask)))
    end
    local padding = additive_mask(fname, "key_padding_mask", key_padding_mask, dtype)
    padding = padding:reshape(N, 1, 1, S):expand(N, H, 1, S):reshape(N * H, 1, S)
    mask = mask and mask + padding or padding
  end
  return mask
end

-- mha(query, key, value [, key_padding_mask [, need_weights = true [, attn_mask [,
-- average_attn_weights = true [, is_causal = false]]]]]) or the same by name in an options table.
-- query [L, N, E], key [S, N, kdim], value [S, N, vdim] ([N, L, E] ... with batch_first), or one
-- sequence [L, E], [S, kdim], [S, vdim]. Returns the output (the query's shape) and the attention
-- weights [N, L, S] averaged over the heads ([N, heads, L, S] with average_attn_weights = false;
-- [L, S] unbatched), or nil with need_weights = false.
function nn.MultiheadAttention:forward(...)
  local fname = "MultiheadAttention"
  local query, key, value = ...
  local a = parse_args(fname, 3, MHA_FORWARD_OPTIONS, 5, ...)
  check_tensor(fname, "query", query)
  check_tensor(fname, "key", key)
  check_tensor(fname, "value", value)
  local key_padding_mask = check_tensor(fname, "key_padding_mask", a.key_padding_mask, true)
  local attn_mask = check_tensor(fname, "attn_mask", a.attn_mask, true)
  local need_weights = check_boolean(fname, "need_weights", a.need_weights, true)
  local average = check_boolean(fname, "average_attn_weights", a.average_attn_weights, true)
  local is_causal = check_boolean(fname, "is_causal", a.is_causal, false)
  local batched = attention_is_batched(fname, query, key, value, key_padding_mask, attn_mask)
  return named(fname, function()
    local q_in, k_in, v_in = query, key, value
    if batched and self.batch_first then   -- to [L, N, E], keeping self-attention's one tensor one
      q_in = query:transpose(1, 2)
      k_in = key == query and q_in or key:transpose(1, 2)
      v_in = value == key and k_in or value:transpose(1, 2)
    elseif not batched then
      q_in = query:unsqueeze(2)
      k_in = key == query and q_in or key:unsqueeze(2)
      v_in = value == key and k_in or value:unsqueeze(2)
      if key_padding_mask then key_padding_mask = key_padding_mask:unsqueeze(1) end
    end
    local L, N, E = q_in:size(1), q_in:size(2), q_in:size(3)
    local S = k_in:size(1)
    if E ~= self.embed_dim or k_in:size(3) ~= self.kdim or v_in:size(3) ~= self.vdim then
      fail(string.format("%s: query, key, value must end in embed_dim %d, kdim %d, vdim %d; got %s, %s, %s", fname,
                         self.embed_dim, self.kdim, self.vdim, shape_text(query), shape_text(key), shape_text(value)))
    end
    if k_in:size(2) ~= N or v_in:size(2) ~= N or v_in:size(1) ~= S then
      fail(string.format("%s: query %s, key %s and value %s must have the same batch size, key and value the same length",
                         fname, shape_text(query), shape_text(key), shape_text(value)))
    end
    local H, hd = self.num_heads, self.head_dim
    local mask = self:merged_mask(fname, attn_mask, key_padding_mask, is_causal, N, L, S, query.dtype)
    local q, k, v = self:project_inputs(q_in, k_in, v_in)
    -- heads as batches: [L, N, E] -> [N * H, L, head_dim]
    q = q:reshape(L, N * H, hd):transpose(1, 2)
    k = k:reshape(S, N * H, hd):transpose(1, 2)
    v = v:reshape(S, N * H, hd):transpose(1, 2)
    local scores = (q * math.sqrt(1 / hd)):bmm(k:transpose(2, 3))   -- [N * H, L, S]
    if mask then scores = scores + mask end
    local weights = F.dropout(scores:softmax(3), self.dropout, self.training)
    local output = weights:bmm(v):transpose(1, 2):reshape(L, N, E)
    output = self.out_proj(output)
    if batched and self.batch_first then output = output:transpose(1, 2) elseif not batched then output = output:squeeze(2) end
    if not need_weights then return output, nil end
    weights = weights:reshape(N, H, L, S)
    if average then weights = weights:mean(2) end
    if not batched then weights = weights:squeeze(1) end
    return output, weights
  end)
end

return nn
