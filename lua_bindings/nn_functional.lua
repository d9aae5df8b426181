-- nn_functional.lua: nn.functional, PyTorch's torch.nn.functional (also the global `F`): torch's
-- NN functions under PyTorch's names, and F's losses and NN functions written over torch's ops.
-- Embedded in tapedeck and loaded after nn.lua, into the same `nn`; tapedeck_open then adds the
-- activations written in C (leaky_relu, elu, gelu, silu, softplus: lua_elementwise_ops.cpp).
-- Arguments follow the house convention (nn.lua: "Arguments of F's functions and of the modules").
--
-- [SECTION]s: torch's functions under PyTorch's names; F's losses (l1_loss ... multi_margin_loss);
-- F's NN functions (dropout, layer_norm, batch_norm, embedding, one_hot, normalize, pad, avg_pool2d,
-- adaptive_avg_pool2d).
local nn = require "nn"
local errors = require "tapedeck.errors"
local fail, describe = errors.fail, errors.describe
local helpers = nn._helpers
local named, check_integer, parse_args = helpers.named, helpers.check_integer, helpers.parse_args
local declare_options = helpers.declare_options
local check_tensor, check_number, check_boolean = helpers.check_tensor, helpers.check_number, helpers.check_boolean
local check_reduction, size_list = helpers.check_reduction, helpers.size_list

-- ============================================================================================
-- nn.functional (F): torch's functions, under PyTorch's names

nn.functional = {}
for _, name in ipairs({"relu", "tanh", "sigmoid", "softmax", "log_softmax", "linear", "conv2d", "max_pool2d",
                       "flatten"}) do
  nn.functional[name] = torch[name]
end
local F = nn.functional

-- ============================================================================================
-- F's losses written over torch's ops (docs/lua_api.md says which ops each is made of; their
-- gradients are PyTorch's because those ops' gradients compose to it).

local function same_shape(a, b)
  local sa, sb = a.shape, b.shape
  if #sa ~= #sb then return false end
  for i = 1, #sa do if sa[i] ~= sb[i] then return false end end
  return true
end

-- PyTorch's apply_loss_reduction.
local function reduce_loss(loss, reduction)
  if reduction == "mean" then return loss:mean() end
  if reduction == "sum" then return loss:sum() end
  return loss
end

local L1_LOSS_OPTIONS = declare_options("F.l1_loss", {"reduction"})
function F.l1_loss(...)
  local input, target = ...
  local a = parse_args("l1_loss", 2, L1_LOSS_OPTIONS, 0, ...)
  check_tensor("l1_loss", "input", input)
  check_tensor("l1_loss", "target", target)
  local reduction = check_reduction("l1_loss", a.reduction)
  return named("l1_loss", function() return reduce_loss((input - target):abs(), reduction) end)
end

local SMOOTH_L1_LOSS_OPTIONS = declare_options("F.smooth_l1_loss", {"reduction", "beta"})
function F.smooth_l1_loss(...)
  local input, target = ...
  local a = parse_args("smooth_l1_loss", 2, SMOOTH_L1_LOSS_OPTIONS, 0, ...)
  check_tensor("smooth_l1_loss", "input", input)
  check_tensor("smooth_l1_loss", "target", target)
  local reduction = check_reduction("smooth_l1_loss", a.reduction)
  local beta = check_number("smooth_l1_loss", "beta", a.beta, 1.0)
  if beta < 0 then fail("smooth_l1_loss: beta must be >= 0, got " .. describe(beta)) end
  return named("smooth_l1_loss", function()
    local d = (input - target):abs()
    if beta == 0 then return reduce_loss(d, reduction) end
    return reduce_loss(torch.where(d:lt(beta), d:square() * (0.5 / beta), d - 0.5 * beta), reduction)
  end)
end

local BINARY_CROSS_ENTROPY_OPTIONS = declare_options("F.binary_cross_entropy", {"weight", "reduction"})
function F.binary_cross_entropy(...)
  local input, target = ...
  local a = parse_args("binary_cross_entropy", 2, BINARY_CROSS_ENTROPY_OPTIONS, 1, ...)
  check_tensor("binary_cross_entropy", "input", input)
  check_tensor("binary_cross_entropy", "target", target)
  local weight = check_tensor("binary_cross_entropy", "weight", a.weight, true)
  local reduction = check_reduction("binary_cross_entropy", a.reduction)
  if not same_shape(input, target) then
    fail(string.format("binary_cross_entropy: target %s must have the input's shape %s", tostring(target.shape), tostring(input.shape)))
  end
  return named("binary_cross_entropy", function()
    -- PyTorch's: each log clamped at -100, so a probability of 0 or 1 gives a finite loss.
    local loss = -(target * input:log():clamp{min = -100} + (1 - target) * (1 - input):log():clamp{min = -100})
    if weight then loss = loss * weight end
    return reduce_loss(loss, reduction)
  end)
end

local BINARY_CROSS_ENTROPY_WITH_LOGITS_OPTIONS = declare_options("F.binary_cross_entropy_with_logits", {"weight", "reduction", "pos_weight"})
function F.binary_cross_entropy_with_logits(...)
  local input, target = ...
  local fname = "binary_cross_entropy_with_logits"
  local a = parse_args(fname, 2, BINARY_CROSS_ENTROPY_WITH_LOGITS_OPTIONS, 1, ...)
  check_tensor(fname, "input", input)
  check_tensor(fname, "target", target)
  local weight = check_tensor(fname, "weight", a.weight, true)
  local pos_weight = check_tensor(fname, "pos_weight", a.pos_weight, true)
  local reduction = check_reduction(fname, a.reduction)
  if not same_shape(input, target) then
    fail(string.format("%s: target %s must have the input's shape %s", fname, tostring(target.shape), tostring(input.shape)))
  end
  return named(fname, function()
    -- PyTorch's stable form: log(1 + e^-x) = m + log(e^-m + e^(-x-m)) with m = max(-x, 0).
    local max_val = (-input):clamp{min = 0}
    local log_term = ((-max_val):exp() + (-input - max_val):exp()):log() + max_val
    local loss
    if pos_weight then
      loss = (1 - target) * input + ((pos_weight - 1) * target + 1) * log_term
    else
      loss = (1 - target) * input + log_term
    end
    if weight then loss = loss * weight end
    return reduce_loss(loss, reduction)
  end)
end

-- The class dim of scores: [N, C] (2) or one example [C] (1) (nll_loss and cross_entropy take
-- [N, C, d1, ...] too, flattened first: flatten_class_dims).
local function class_scores(fname, input)
  if input:dim() ~= 1 and input:dim() ~= 2 then
    fail(string.format("%s: input must be [N, C] or [C], got %s", fname, tostring(input.shape)))
  end
  return input:dim()
end

-- Scores [N, C, d1, ...] (a sequence model's, PyTorch's K-dim form) as [N * d1 * ..., C]: the class
-- dim moved last, then flattened; the target alike (class labels [N, d1, ...] to [N * d1 * ...],
-- probabilities of the input's shape as the input). Also returns the shape a "none" reduction has
-- ([N, d1, ...]). The losses then are the [M, C] ones, and so are their means and gradients.
local function flatten_class_dims(fname, input, target)
  local C, order, kept = input:size(2), {1}, {input:size(1)}
  for d = 3, input:dim() do order[#order + 1], kept[#kept + 1] = d, input:size(d) end
  order[#order + 1] = 2
  if target.dtype ~= "int64" and same_shape(input, target) then
    return input:permute(order):reshape(-1, C), target:permute(order):reshape(-1, C), kept
  end
  local labels_ok = target:dim() == #kept
  for i, n in ipairs(kept) do labels_ok = labels_ok and target:size(i) == n end
  if not labels_ok then
    fail(string.format("%s: for input %s ([N, C, d1, ...]) the target must be class labels [N, d1, ...] = [%s] or " ..
                       "probabilities of the input's shape, got %s", fname, tostring(input.shape), table.concat(kept, ","),
                       tostring(target.shape)))
  end
  return input:permute(order):reshape(-1, C), target:reshape(-1), kept
end

-- -sum over examples of weight[label] * logp[i, label] with PyTorch's nll_loss semantics: a label
-- equal to ignore_index counts for nothing (also not in the mean's denominator, the sum of the
-- weights of the labels counted).
local function nll_composed(logp, labels, weight, ignore_index, reduction)
  local one = logp:dim() == 1
  if one then logp, labels = logp:unsqueeze(1), labels:reshape(1) end
  if labels.dtype ~= "int64" then labels = labels:long() end
  local kept = labels:ne(ignore_index)                          -- 1 or 0 (float32)
  local safe = torch.where(kept, labels, 1)                     -- any valid class where ignored
  local picked = logp:gather(2, safe:unsqueeze(2)):squeeze(2)   -- logp[i, label_i]
  local w = weight and weight:index_select(1, safe) * kept or kept:to(logp.dtype)
  local losses = -(picked * w)
  if reduction == "none" then return one and losses:reshape({}) or losses end
  if reduction == "sum" then return losses:sum() end
  return losses:sum() / w:sum()
end

-- a string at position 3 is the reduction, as torch.cross_entropy(x, y, "sum") takes it.
local function legacy_reduction(...)
  local n = select("#", ...)
  local a, b, c = ...
  if n == 3 and type(c) == "string" then return a, b, {reduction = c} end
  return ...
end

local NLL_LOSS_OPTIONS = declare_options("F.nll_loss", {"weight", "ignore_index", "reduction"})
function F.nll_loss(...)
  local input, target = ...
  local a = parse_args("nll_loss", 2, NLL_LOSS_OPTIONS, 1, legacy_reduction(...))
  check_tensor("nll_loss", "input", input)
  check_tensor("nll_loss", "target", target)
  local weight = check_tensor("nll_loss", "weight", a.weight, true)
  local ignore_index = check_number("nll_loss", "ignore_index", a.ignore_index, -100)
  local reduction = check_reduction("nll_loss", a.reduction)
  if input:dim() > 2 then   -- [N, C, d1, ...] with labels [N, d1, ...]
    local logp, labels, kept = flatten_class_dims("nll_loss", input, target)
    local loss = F.nll_loss(logp, labels, {weight = weight, ignore_index = a.ignore_index, reduction = reduction})
    return reduction == "none" and loss:reshape(kept) or loss
  end
  class_scores("nll_loss", input)
  if not weight and a.ignore_index == nil and reduction ~= "none" then
    return torch.nll_loss(input, target, reduction)   -- the op row
  end
  return named("nll_loss", nll_composed, input, target, weight, ignore_index, reduction)
end

local CROSS_ENTROPY_OPTIONS = declare_options("F.cross_entropy", {"weight", "ignore_index", "reduction", "label_smoothing"})
function F.cross_entropy(...)
  local input, target = ...
  local fname = "cross_entropy"
  local a = parse_args(fname, 2, CROSS_ENTROPY_OPTIONS, 1, legacy_reduction(...))
  check_tensor(fname, "input", input)
  check_tensor(fname, "target", target)
  local weight = check_tensor(fname, "weight", a.weight, true)
  local ignore_index = check_number(fname, "ignore_index", a.ignore_index, -100)
  local reduction = check_reduction(fname, a.reduction)
  local smoothing = check_number(fname, "label_smoothing", a.label_smoothing, 0)
  if smoothing < 0 or smoothing > 1 then fail(fname .. ": label_smoothing must be in [0, 1], got " .. describe(smoothing)) end
  if input:dim() > 2 then   -- [N, C, d1, ...] with labels [N, d1, ...] (or probabilities of the input's shape)
    local scores, labels, kept = flatten_class_dims(fname, input, target)
    local loss = F.cross_entropy(scores, labels, {weight = weight, ignore_index = a.ignore_index, reduction = reduction,
                                                  label_smoothing = a.label_smoothing})
    return reduction == "none" and loss:reshape(kept) or loss
  end
  local class_dim = class_scores(fname, input)
  local probabilities = target.dtype ~= "int64" and same_shape(input, target)
  if probabilities and a.ignore_index ~= nil then
    fail(fname .. ": ignore_index is not supported with probability targets (a target of the input's shape)")
  end
  if not probabilities and not weight and a.ignore_index == nil and smoothing == 0 and reduction ~= "none" then
    return torch.cross_entropy(input, target, reduction)   -- the op row
  end
  if weight and (weight:dim() ~= 1 or weight:size(1) ~= input:size(class_dim)) then
    fail(string.format("%s: weight must be [C] = [%d], got %s", fname, input:size(class_dim), tostring(weight.shape)))
  end
  return named(fname, function()
    local logp = input:log_softmax(class_dim)
    local C = input:size(class_dim)
    if probabilities then
      if smoothing > 0 then target = target * (1 - smoothing) + smoothing / C end
      local terms = logp * target
      if weight then terms = terms * weight end
      local loss = -terms:sum(class_dim)
      if reduction == "mean" then return loss:sum() / (input:numel() / C) end
      return reduce_loss(loss, reduction)
    end
    local nll = nll_composed(logp, target, weight, ignore_index, reduction)
    if smoothing == 0 then return nll end
    -- PyTorch's label smoothing: (1 - e) nll + e / C * the sum over classes of -weight[c] logp[c]
    local labels = target.dtype == "int64" and target or target:long()
    local kept = labels:ne(ignore_index):to(logp.dtype)
    local smooth = -(weight and logp * weight or logp):sum(class_dim) * kept
    local ret
    if reduction == "mean" then
      if weight then
        ret = smooth:sum() / (weight:index_select(1, torch.where(kept, labels, 1):reshape(-1)) * kept:reshape(-1)):sum()
      else
        ret = smooth:sum() / kept:sum()   -- the labels counted, as nll_loss's mean
      end
    else
      ret = reduce_loss(smooth, reduction)
    end
    return nll * (1 - smoothing) + ret * (smoothing / C)
  end)
end

local MSE_LOSS_OPTIONS = declare_options("F.mse_loss", {"reduction"})
function F.mse_loss(...)
  local input, target = ...
  local a = parse_args("mse_loss", 2, MSE_LOSS_OPTIONS, 0, legacy_reduction(...))
  check_tensor("mse_loss", "input", input)
  check_tensor("mse_loss", "target", target)
  local reduction = check_reduction("mse_loss", a.reduction)
  if reduction ~= "none" then return torch.mse_loss(input, target, reduction) end   -- the op row
  return named("mse_loss", function() return (input - target):square() end)
end

local MULTI_MARGIN_LOSS_OPTIONS = declare_options("F.multi_margin_loss", {"p", "margin", "weight", "reduction"})
function F.multi_margin_loss(...)
  local input, target = ...
  local fname = "multi_margin_loss"
  local a = parse_args(fname, 2, MULTI_MARGIN_LOSS_OPTIONS, 3, legacy_reduction(...))
  check_tensor(fname, "input", input)
  check_tensor(fname, "target", target)
  local p = check_number(fname, "p", a.p, 1)
  if p ~= 1 and p ~= 2 then fail(fname .. ": p must be 1 or 2, got " .. describe(p)) end
  local margin = check_number(fname, "margin", a.margin, 1)
  local weight = check_tensor(fname, "weight", a.weight, true)
  local reduction = check_reduction(fname, a.reduction)
  local class_dim = class_scores(fname, input)
  if p == 1 and margin == 1 and not weight and reduction ~= "none" then
    return torch.multi_margin_loss(input, target, reduction)   -- the op row
  end
  return named(fname, function()
    local one = class_dim == 1
    local x, labels = input, target.dtype == "int64" and target or target:long()
    if one then x, labels = x:unsqueeze(1), labels:reshape(1) end
    local C = x:size(2)
    local picked = x:gather(2, labels:unsqueeze(2))                            -- x[i, y_i], [N, 1]
    local hinge = (x - picked + margin):clamp{min = 0}
    if p == 2 then hinge = hinge:square() end
    if weight then hinge = hinge * weight:index_select(1, labels):unsqueeze(2) end
    local is_label = labels:unsqueeze(2):eq(torch.arange(1, C + 1, {device = labels.device}))   -- [N, C]
    local loss = hinge:masked_fill(is_label, 0):sum(2) / C
    if one then loss = loss:reshape({}) end
    return reduce_loss(loss, reduction)
  end)
end

-- ============================================================================================
-- F's NN functions

local DROPOUT_OPTIONS = declare_options("F.dropout", {"p", "training"})
function F.dropout(...)
  local input = ...
  local a = parse_args("dropout", 1, DROPOUT_OPTIONS, 2, ...)
  check_tensor("dropout", "input", input)
  local p = check_number("dropout", "p", a.p, 0.5)
  if p < 0 or p > 1 then fail("dropout: p must be in [0, 1], got " .. describe(p)) end
  local training = check_boolean("dropout", "training", a.training, true)
  if not training or p == 0 then return input end   -- PyTorch returns the input itself
  return named("dropout", function()
    if p == 1 then return input * torch.zeros_like(input) end
    -- PyTorch's: keep each element with probability 1 - p, scaled by 1 / (1 - p)
    local keep = torch.rand_like(input):lt(1 - p)
    return input * keep:div(1 - p)
  end)
end

local LAYER_NORM_OPTIONS = declare_options("F.layer_norm", {"weight", "bias", "eps"})
function F.layer_norm(...)
  local input, normalized_shape = ...
  local a = parse_args("layer_norm", 2, LAYER_NORM_OPTIONS, 3, ...)
  check_tensor("layer_norm", "input", input)
  local shape = size_list("layer_norm", "normalized_shape", normalized_shape)
  local weight = check_tensor("layer_norm", "weight", a.weight, true)
  local bias = check_tensor("layer_norm", "bias", a.bias, true)
  local eps = check_number("layer_norm", "eps", a.eps, 1e-5)
  local k, d = #shape, input:dim()
  local fits = k >= 1 and k <= d
  for i = 1, k do fits = fits and input:size(d - k + i) == shape[i] end
  if not fits then
    fail(string.format("layer_norm: normalized_shape [%s] is not the last dims of the input %s", table.concat(shape, ","),
                       tostring(input.shape)))
  end
  return named("layer_norm", function()
    local dims = {}
    for i = 1, k do dims[i] = d - k + i end
    local mean = input:mean(dims, true)
    local var = input:var(dims, {unbiased = false, keepdim = true})
    local y = (input - mean) * (var + eps):rsqrt()
    if weight then y = y * weight end
    if bias then y = y + bias end
    return y
  end)
end

local BATCH_NORM_OPTIONS = declare_options("F.batch_norm", {"weight", "bias", "training", "momentum", "eps"})
function F.batch_norm(...)
  local input, running_mean, running_var = ...
  local fname = "batch_norm"
  local a = parse_args(fname, 3, BATCH_NORM_OPTIONS, 5, ...)
  check_tensor(fname, "input", input)
  check_tensor(fname, "running_mean", running_mean, true)
  check_tensor(fname, "running_var", running_var, true)
  local weight = check_tensor(fname, "weight", a.weight, true)
  local bias = check_tensor(fname, "bias", a.bias, true)
  local training = check_boolean(fname, "training", a.training, false)
  local momentum = check_number(fname, "momentum", a.momentum, 0.1)
  local eps = check_number(fname, "eps", a.eps, 1e-5)
  if input:dim() < 2 then fail(fname .. ": input must be [N, C, ...], got " .. tostring(input.shape)) end
  if not training and (not running_mean or not running_var) then
    fail(fname .. ": running_mean and running_var are needed when training is false")
  end
  local C = input:size(2)
  for what, t in pairs({running_mean = running_mean, running_var = running_var, weight = weight, bias = bias}) do
    if t and (t:dim() ~= 1 or t:size(1) ~= C) then
      fail(string.format("%s: %s must be [C] = [%d], got %s", fname, what, C, tostring(t.shape)))
    end
  end
  return named(fname, function()
    -- per-channel tensors as [1, C, 1, ...] to broadcast over the input
    local view = {1, C}
    for i = 3, input:dim() do view[i] = 1 end
    local dims = {1}
    for i = 3, input:dim() do dims[#dims + 1] = i end
    local mean, var
    if training then
      local count = input:numel() / C
      if count <= 1 then fail(string.format("%s: expected more than 1 value per channel when training, got input %s", fname,
                                            tostring(input.shape))) end
      mean = input:mean(dims, true)
      var = input:var(dims, {unbiased = false, keepdim = true})
      if running_mean or running_var then
        torch.no_grad(function()   -- PyTorch's update: the running var is unbiased
          if running_mean then running_mean:mul_(1 - momentum):add_(mean:detach():reshape(C), momentum) end
          if running_var then running_var:mul_(1 - momentum):add_(var:detach():reshape(C) * (count / (count - 1)), momentum) end
        end)
      end
    else
      mean, var = running_mean:reshape(view), running_var:reshape(view)
    end
    local y = (input - mean) * (var + eps):rsqrt()
    if weight then y = y * weight:reshape(view) end
    if bias then y = y + bias:reshape(view) end
    return y
  end)
end

local EMBEDDING_OPTIONS = declare_options("F.embedding", {})
function F.embedding(...)
  local input, weight = ...
  parse_args("embedding", 2, EMBEDDING_OPTIONS, 0, ...)
  check_tensor("embedding", "input", input)
  check_tensor("embedding", "weight", weight)
  if input.dtype ~= "int64" then fail("embedding: input must be int64 indices (1-based), got " .. input.dtype) end
  if weight:dim() ~= 2 then fail("embedding: weight must be [num_embeddings, embedding_dim], got " .. tostring(weight.shape)) end
  return named("embedding", function()
    local shape = {}
    for i = 1, input:dim() do shape[i] = input:size(i) end
    shape[#shape + 1] = weight:size(2)
    return weight:index_select(1, input:reshape(-1)):reshape(shape)
  end)
end

local ONE_HOT_OPTIONS = declare_options("F.one_hot", {"num_classes"})
function F.one_hot(...)
  local labels = ...
  local a = parse_args("one_hot", 1, ONE_HOT_OPTIONS, 1, ...)
  check_tensor("one_hot", "tensor", labels)
  if labels.dtype ~= "int64" then fail("one_hot: tensor must be int64 (1-based labels), got " .. labels.dtype) end
  local num_classes = a.num_classes == nil and -1 or check_integer("one_hot", "num_classes", a.num_classes, -1)
  if labels:numel() > 0 then
    local low, high = labels:min():item(), labels:max():item()
    if low < 1 then fail("one_hot: labels must be >= 1 (1-based), got " .. low) end
    if num_classes == -1 then num_classes = high end
    if high > num_classes then fail(string.format("one_hot: label %d is larger than num_classes = %d", high, num_classes)) end
  elseif num_classes == -1 then
    fail("one_hot: num_classes = -1 (from the labels) needs at least one label")
  end
  return named("one_hot", function()
    return labels:unsqueeze(-1):eq(torch.arange(1, num_classes + 1, {device = labels.device})):long()
  end)
end

local NORMALIZE_OPTIONS = declare_options("F.normalize", {"p", "dim", "eps"})
function F.normalize(...)
  local input = ...
  local a = parse_args("normalize", 1, NORMALIZE_OPTIONS, 3, ...)
  check_tensor("normalize", "input", input)
  local p = check_number("normalize", "p", a.p, 2)
  local dim = a.dim == nil and 2 or check_integer("normalize", "dim", a.dim, math.mininteger)
  local eps = check_number("normalize", "eps", a.eps, 1e-12)
  return named("normalize", function()
    return input / input:norm(p, dim, true):clamp{min = eps}:expand_as(input)
  end)
end

-- The 1-based indices a non-constant pad reads along a dim of size n padded by `before`, `after`.
local function pad_indices(mode, n, before, after)
  local index = {}
  for i = -before, n - 1 + after do
    local j
    if mode == "reflect" then
      j = i < 0 and -i or (i >= n and 2 * (n - 1) - i or i)
    elseif mode == "replicate" then
      j = math.min(math.max(i, 0), n - 1)
    else   -- circular
      j = i % n
    end
    index[#index + 1] = j + 1
  end
  return torch.tensor(index, {dtype = "int64"})
end

local PAD_OPTIONS = declare_options("F.pad", {"mode", "value"})
function F.pad(...)
  local input, pad = ...
  local a = parse_args("pad", 2, PAD_OPTIONS, 2, ...)
  check_tensor("pad", "input", input)
  local pads = size_list("pad", "pad", pad)
  local mode = a.mode == nil and "constant" or a.mode
  if mode ~= "constant" and mode ~= "reflect" and mode ~= "replicate" and mode ~= "circular" then
    fail("pad: mode must be \"constant\", \"reflect\", \"replicate\" or \"circular\", got " .. describe(mode))
  end
  local value = check_number("pad", "value", a.value, 0)
  if mode ~= "constant" and a.value ~= nil and a.value ~= 0 then fail("pad: value is for mode \"constant\" only") end
  if #pads % 2 ~= 0 or #pads / 2 > input:dim() then
    fail(string.format("pad: pad must hold two sizes per dim (the last dim first), at most %d, got %d", 2 * input:dim(), #pads))
  end
  return named("pad", function()
    local x = input
    for k = 1, #pads // 2 do
      local dim, before, after = input:dim() - k + 1, pads[2 * k - 1], pads[2 * k]
      local n = x:size(dim)
      if n + before + after < 0 or (mode ~= "constant" and (before < 0 or after < 0)) then
        fail(string.format("pad: padding (%d, %d) of dim %d (size %d) is not possible in mode %s", before, after, dim, n, mode))
      end
      if mode == "constant" then
        if before < 0 then x, n, before = x:narrow(dim, 1 - before, n + before), n + before, 0 end
        if after < 0 then x, n, after = x:narrow(dim, 1, n + after), n + after, 0 end
        local parts = {}
        local function block(size)
          local shape = x:size()
          shape[dim] = size
          parts[#parts + 1] = torch.full(shape, value, {dtype = x.dtype, device = x.device})
        end
        if before > 0 then block(before) end
        parts[#parts + 1] = x
        if after > 0 then block(after) end
        if #parts > 1 then x = torch.cat(parts, dim) end
      else
        if (mode == "reflect" and (before >= n or after >= n)) or (mode == "circular" and (before > n or after > n)) then
          fail(string.format("pad: padding (%d, %d) of dim %d (size %d) is too large for mode %s", before, after, dim, n, mode))
        end
        x = x:index_select(dim, pad_indices(mode, n, before, after):to(x.device))
      end
    end
    return x
  end)
end

-- A pair of sizes from a number or a list of two (PyTorch's int or tuple).
local function size_pair(fname, what, v, min)
  if math.type(v) == "integer" then v = {v, v} end
  if type(v) == "table" and #v == 2 and math.type(v[1]) == "integer" and math.type(v[2]) == "integer" and v[1] >= min
     and v[2] >= min then
    return v[1], v[2]
  end
  fail(string.format("%s: %s must be an integer >= %d or a list of two, got %s", fname, what, min, describe(v)))
end

local AVG_POOL2D_OPTIONS = declare_options("F.avg_pool2d", {"stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"})
function F.avg_pool2d(...)
  local input, kernel_size = ...
  local fname = "avg_pool2d"
  local a = parse_args(fname, 2, AVG_POOL2D_OPTIONS, 5, ...)
  check_tensor(fname, "input", input)
  local kh, kw = size_pair(fname, "kernel_size", kernel_size, 1)
  local sh, sw = kh, kw
  if a.stride ~= nil then sh, sw = size_pair(fname, "stride", a.stride, 1) end
  local ph, pw = 0, 0
  if a.padding ~= nil then ph, pw = size_pair(fname, "padding", a.padding, 0) end
  if check_boolean(fname, "ceil_mode", a.ceil_mode, false) then fail(fname .. ": ceil_mode = true is not supported") end
  local include_pad = check_boolean(fname, "count_include_pad", a.count_include_pad, true)
  local divisor = a.divisor_override ~= nil and check_integer(fname, "divisor_override", a.divisor_override, 1) or nil
  if ph * 2 > kh or pw * 2 > kw then fail(fname .. ": padding must be at most half the kernel size") end
  if input:dim() ~= 3 and input:dim() ~= 4 then fail(fname .. ": input must be [N, C, H, W] or [C, H, W], got " .. tostring(input.shape)) end
  local H, W = input:size(-2) + 2 * ph, input:size(-1) + 2 * pw
  if H < kh or W < kw then fail(string.format("%s: the kernel %dx%d is larger than the padded input %dx%d", fname, kh, kw, H, W)) end
  local oh, ow = (H - kh) // sh + 1, (W - kw) // sw + 1
  return named(fname, function()
    -- the sum of the kh * kw strided slices of the zero-padded input, one per offset in the window
    local function window_sum(t)
      local total
      for i = 1, kh do
        for j = 1, kw do
          local rows = t:narrow(-2, i, (oh - 1) * sh + 1)
          local part = rows:narrow(-1, j, (ow - 1) * sw + 1)
          if sh > 1 or sw > 1 then
            local key = {}
            for _ = 1, t:dim() - 2 do key[#key + 1] = {} end
            key[#key + 1] = {1, -1, sh}
            key[#key + 1] = {1, -1, sw}
            part = part[key]
          end
          total = total and total + part or part
        end
      end
      return total
    end
    local padded = (ph > 0 or pw > 0) and F.pad(input, {pw, pw, ph, ph}) or input
    local sums = window_sum(padded)
    if divisor then return sums / divisor end
    if include_pad or (ph == 0 and pw == 0) then return sums / (kh * kw) end
    local ones = torch.ones(input:size(-2), input:size(-1), {dtype = sums.dtype, device = sums.device})
    return sums / window_sum(F.pad(ones, {pw, pw, ph, ph}))
  end)
end

-- F.adaptive_avg_pool2d(x, output_size): output cell (i, j) is the mean of rows
-- floor((i-1) H / oh) + 1 .. ceil(i H / oh) and the same for columns (PyTorch's windows). The mean
-- of a rectangle is the mean over its rows of the means over its columns, so this is oh row means
-- (narrow, mean) joined by cat, then ow column means: oh + ow means, not oh * ow. A size nil (or
-- a missing entry) keeps the input's.
local ADAPTIVE_AVG_POOL2D_OPTIONS = declare_options("F.adaptive_avg_pool2d", {})
function F.adaptive_avg_pool2d(...)
  local input, output_size = ...
  local fname = "adaptive_avg_pool2d"
  parse_args(fname, 2, ADAPTIVE_AVG_POOL2D_OPTIONS, 0, ...)
  check_tensor(fname, "input", input)
  if input:dim() ~= 3 and input:dim() ~= 4 then fail(fname .. ": input must be [N, C, H, W] or [C, H, W], got " .. tostring(input.shape)) end
  local sizes = type(output_size) == "table" and output_size or {output_size, output_size}
  local out = {}
  for i, dim in ipairs({-2, -1}) do
    local n = sizes[i] == nil and input:size(dim) or sizes[i]
    if math.type(n) ~= "integer" or n < 1 then
      fail(string.format("%s: output_size must be an integer >= 1 or a list {h, w}, got %s", fname, describe(output_size)))
    end
    out[i] = n
  end
  return named(fname, function()
    local x = input
    for i, dim in ipairs({-2, -1}) do
      local size, n = x:size(dim), out[i]
      if size % n == 0 and size // n > 1 then   -- equal windows: one reshape and mean
        local shape = x:size()
        local d = #shape + dim + 1
        x = x:unflatten(d, {n, size // n}):mean(d + 1)
      elseif size ~= n then
        local parts = {}
        for k = 0, n - 1 do
          local first, last = (k * size) // n, -((-(k + 1) * size) // n)   -- floor and ceil
          parts[#parts + 1] = x:narrow(dim, first + 1, last - first):mean(dim, true)
        end
        x = torch.cat(parts, dim)
      end
    end
    return x
  end)
end

return nn
