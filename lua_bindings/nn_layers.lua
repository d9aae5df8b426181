-- nn_layers.lua: the layers of PyTorch's torch.nn, written in Lua over torch's ops and F: Linear,
-- Conv2d, MaxPool2d, shape layers, activations, Dropout, normalisation, Embedding, average pooling,
-- and the losses as modules. Embedded in tapedeck and loaded after nn.lua and nn_functional.lua,
-- into the same `nn`. Constructors take PyTorch's arguments (1-based dims), keyword arguments in a
-- trailing options table; extra_repr prints what PyTorch prints.
--
-- [SECTION]s: layers (Linear, Conv2d, MaxPool2d); modules over F; losses as modules.
local nn = require "nn"
local errors = require "tapedeck.errors"
local fail, describe = errors.fail, errors.describe
local helpers = nn._helpers
local check_integer, check_pair, pair_repr = helpers.check_integer, helpers.check_pair, helpers.pair_repr
local check_options, named, check_dtype = helpers.check_options, helpers.named, helpers.check_dtype
local declare_options, place_on_device = helpers.declare_options, helpers.place_on_device
local init_parameter, uniform_parameter = helpers.init_parameter, helpers.uniform_parameter
local py_repr, py_size, is_options, parse_args = helpers.py_repr, helpers.py_size, helpers.is_options, helpers.parse_args
local check_tensor, check_number, check_boolean = helpers.check_tensor, helpers.check_number, helpers.check_boolean
local check_reduction, size_list = helpers.check_reduction, helpers.size_list
local Module, F = nn.Module, nn.functional

-- ============================================================================================
-- Layers

nn.Linear = Module:extend("Linear")
local LINEAR_OPTIONS = declare_options("nn.Linear", {"bias", "device", "dtype"})
function nn.Linear:init(in_features, out_features, opts)
  in_features = check_integer("Linear", "in_features", in_features, 0)
  out_features = check_integer("Linear", "out_features", out_features, 0)
  opts = check_options(LINEAR_OPTIONS, opts, "{bias = false}")
  check_dtype("Linear", opts.dtype, opts.device)
  self.in_features, self.out_features = in_features, out_features
  local bound = 1 / math.sqrt(in_features)
  self.weight = named("Linear", uniform_parameter, {out_features, in_features}, bound, opts.dtype)
  if opts.bias ~= false then self.bias = named("Linear", uniform_parameter, {out_features}, bound, opts.dtype) end
  if self.bias == nil then self:register_parameter("bias", nil) end   -- PyTorch's None: lin.bias reads nil
  place_on_device(self, opts.device)
end
function nn.Linear:forward(x) return torch.linear(x, self.weight, self.bias) end
function nn.Linear:extra_repr()
  return string.format("in_features=%d, out_features=%d, bias=%s", self.in_features, self.out_features,
                       py_repr(self.bias ~= nil))
end

-- nn.Conv2d(in, out, kernel_size [, {stride =, padding =, dilation =, groups =, bias =, dtype =}]):
-- sizes as a number or {h, w}; padding also "valid" or "same" (stride 1 only, as PyTorch).
-- PyTorch's init: weight and bias uniform in ±1/sqrt(fan_in), fan_in = in/groups * kH * kW.
nn.Conv2d = Module:extend("Conv2d")
local CONV2D_OPTIONS = declare_options("nn.Conv2d", {"stride", "padding", "dilation", "groups", "bias", "padding_mode",
                                                     "device", "dtype"})
function nn.Conv2d:init(in_channels, out_channels, kernel_size, opts)
  in_channels = check_integer("Conv2d", "in_channels", in_channels, 1)
  out_channels = check_integer("Conv2d", "out_channels", out_channels, 1)
  local kh, kw = check_pair("Conv2d", "kernel_size", kernel_size, 1)
  opts = check_options(CONV2D_OPTIONS, opts, "{stride = 1, padding = 0}")
  check_dtype("Conv2d", opts.dtype, opts.device)
  -- sizes are stored as given (a number or {h, w}); rawset: a {h, w} is not a list of modules to register
  self.in_channels, self.out_channels = in_channels, out_channels
  rawset(self, "kernel_size", kernel_size)
  rawset(self, "stride", opts.stride == nil and 1 or opts.stride)
  local sh, sw = check_pair("Conv2d", "stride", self.stride, 1)
  rawset(self, "padding", opts.padding == nil and 0 or opts.padding)
  if self.padding == "same" then
    if sh ~= 1 or sw ~= 1 then fail("Conv2d: padding=\"same\" is not supported for strided convolutions") end
  elseif self.padding ~= "valid" then
    check_pair("Conv2d", "padding", self.padding, 0)
  end
  rawset(self, "dilation", opts.dilation == nil and 1 or opts.dilation)
  check_pair("Conv2d", "dilation", self.dilation, 1)
  self.groups = opts.groups == nil and 1 or check_integer("Conv2d", "groups", opts.groups, 1)
  if in_channels % self.groups ~= 0 then fail("Conv2d: in_channels must be divisible by groups") end
  if out_channels % self.groups ~= 0 then fail("Conv2d: out_channels must be divisible by groups") end
  if opts.padding_mode ~= nil and opts.padding_mode ~= "zeros" then
    fail("Conv2d: padding_mode " .. describe(opts.padding_mode) .. " is not supported (only \"zeros\")")
  end
  local bound = 1 / math.sqrt(in_channels // self.groups * kh * kw)
  self.weight = named("Conv2d", uniform_parameter, {out_channels, in_channels // self.groups, kh, kw}, bound, opts.dtype)
  if opts.bias ~= false then self.bias = named("Conv2d", uniform_parameter, {out_channels}, bound, opts.dtype) end
  if self.bias == nil then self:register_parameter("bias", nil) end
  place_on_device(self, opts.device)
end
function nn.Conv2d:forward(x)
  return torch.conv2d(x, self.weight, self.bias,
                      {stride = self.stride, padding = self.padding, dilation = self.dilation, groups = self.groups})
end
-- As PyTorch's: the options that are not their defaults.
function nn.Conv2d:extra_repr()
  local s = string.format("%d, %d, kernel_size=%s, stride=%s", self.in_channels, self.out_channels,
                          pair_repr(self.kernel_size), pair_repr(self.stride))
  if type(self.padding) == "string" then s = s .. ", padding=" .. self.padding
  elseif self.padding ~= 0 then s = s .. ", padding=" .. pair_repr(self.padding) end
  if self.dilation ~= 1 then s = s .. ", dilation=" .. pair_repr(self.dilation) end
  if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
  if self.bias == nil then s = s .. ", bias=False" end
  return s
end

-- nn.MaxPool2d(kernel_size [, stride] [, {stride =, padding =, dilation =, ceil_mode =, return_indices =}]):
-- sizes as a number or {h, w}; stride defaults to kernel_size.
nn.MaxPool2d = Module:extend("MaxPool2d")
local MAX_POOL2D_OPTIONS = declare_options("nn.MaxPool2d", {"stride", "padding", "dilation", "return_indices", "ceil_mode"})
function nn.MaxPool2d:init(kernel_size, stride, opts)
  if opts == nil and type(stride) == "table" and type(next(stride)) == "string" then stride, opts = nil, stride end
  check_pair("MaxPool2d", "kernel_size", kernel_size, 1)
  opts = check_options(MAX_POOL2D_OPTIONS, opts, "{stride = 2, padding = 1}")
  if stride ~= nil and opts.stride ~= nil then fail("MaxPool2d: stride is given twice: as argument 2 and as an option") end
  -- sizes are stored as given (a number or {h, w}); rawset: a {h, w} is not a list of modules to register
  rawset(self, "kernel_size", kernel_size)
  rawset(self, "stride", stride or opts.stride or kernel_size)
  check_pair("MaxPool2d", "stride", self.stride, 1)
  rawset(self, "padding", opts.padding == nil and 0 or opts.padding)
  check_pair("MaxPool2d", "padding", self.padding, 0)
  rawset(self, "dilation", opts.dilation == nil and 1 or opts.dilation)
  check_pair("MaxPool2d", "dilation", self.dilation, 1)
  for _, key in ipairs({"ceil_mode", "return_indices"}) do
    if opts[key] ~= nil and type(opts[key]) ~= "boolean" then
      fail(string.format("MaxPool2d: %s must be true or false, got %s", key, describe(opts[key])))
    end
    self[key] = opts[key] == true
  end
end
function nn.MaxPool2d:forward(x)
  return torch.max_pool2d(x, self.kernel_size, {stride = self.stride, padding = self.padding, dilation = self.dilation,
                                                ceil_mode = self.ceil_mode, return_indices = self.return_indices})
end
function nn.MaxPool2d:extra_repr()
  local function size(v) return type(v) == "table" and pair_repr(v) or tostring(v) end
  return string.format("kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s", size(self.kernel_size),
                       size(self.stride), size(self.padding), size(self.dilation), self.ceil_mode and "True" or "False")
end

-- ============================================================================================
-- Modules over F: shape layers, activations, normalisation, Embedding, pooling, Dropout.

-- Dims are 1-based: the default start_dim=2 keeps the batch dim, as PyTorch's nn.Flatten (start_dim=1).
nn.Flatten = Module:extend("Flatten")
function nn.Flatten:init(start_dim, end_dim)
  self.start_dim = start_dim == nil and 2 or check_integer("Flatten", "start_dim", start_dim, math.mininteger)
  self.end_dim = end_dim == nil and -1 or check_integer("Flatten", "end_dim", end_dim, math.mininteger)
end
function nn.Flatten:forward(x) return torch.flatten(x, self.start_dim, self.end_dim) end
function nn.Flatten:extra_repr() return string.format("start_dim=%d, end_dim=%d", self.start_dim, self.end_dim) end

-- nn.Unflatten(dim, sizes): dim (1-based) split into sizes ({2, 5}; one may be -1).
nn.Unflatten = Module:extend("Unflatten")
function nn.Unflatten:init(dim, unflattened_size)
  self.dim = check_integer("Unflatten", "dim", dim, math.mininteger)
  if type(unflattened_size) ~= "table" or #unflattened_size == 0 then
    fail("Unflatten: unflattened_size must be a list of sizes like {2, 5}, got " .. describe(unflattened_size))
  end
  for _, n in ipairs(unflattened_size) do check_integer("Unflatten", "unflattened_size", n, -1) end
  rawset(self, "unflattened_size", unflattened_size)
end
function nn.Unflatten:forward(x) return x:unflatten(self.dim, self.unflattened_size) end
function nn.Unflatten:extra_repr()
  return string.format("dim=%d, unflattened_size=%s", self.dim, py_size(self.unflattened_size))
end

-- nn.Identity(...): returns its input; arguments are ignored, as PyTorch's.
nn.Identity = Module:extend("Identity")
function nn.Identity:forward(x) return x end

-- Activations: modules with no parameters around one function.
for name, fn in pairs({ReLU = torch.relu, Tanh = torch.tanh, Sigmoid = torch.sigmoid}) do
  local class = Module:extend(name)
  class.forward = function(_, x) return fn(x) end
  nn[name] = class
end

nn.SiLU = Module:extend("SiLU")
function nn.SiLU:forward(x) return F.silu(x) end

-- nn.LeakyReLU([negative_slope = 0.01]) or {negative_slope =}
nn.LeakyReLU = Module:extend("LeakyReLU")
local LEAKY_RELU_OPTIONS = declare_options("nn.LeakyReLU", {"negative_slope"})
function nn.LeakyReLU:init(...)
  local a = parse_args("LeakyReLU", 0, LEAKY_RELU_OPTIONS, 1, ...)
  self.negative_slope = check_number("LeakyReLU", "negative_slope", a.negative_slope, 0.01)
end
function nn.LeakyReLU:forward(x) return F.leaky_relu(x, self.negative_slope) end
function nn.LeakyReLU:extra_repr() return "negative_slope=" .. py_repr(self.negative_slope) end

-- nn.GELU([approximate = "none"]) or {approximate = "tanh"}
nn.GELU = Module:extend("GELU")
local GELU_OPTIONS = declare_options("nn.GELU", {"approximate"})
function nn.GELU:init(...)
  local a = parse_args("GELU", 0, GELU_OPTIONS, 1, ...)
  local approximate = a.approximate == nil and "none" or a.approximate
  if approximate ~= "none" and approximate ~= "tanh" then
    fail("GELU: approximate must be \"none\" or \"tanh\", got " .. describe(approximate))
  end
  self.approximate = approximate
end
function nn.GELU:forward(x) return F.gelu(x, {approximate = self.approximate}) end
function nn.GELU:extra_repr() return "approximate='" .. self.approximate .. "'" end

-- nn.Softmax(dim), nn.LogSoftmax(dim): dim 1-based (PyTorch's dim=1 is 2 here).
for name, fn in pairs({Softmax = "softmax", LogSoftmax = "log_softmax"}) do
  local class = Module:extend(name)
  class.init = function(self, dim) self.dim = check_integer(name, "dim", dim, math.mininteger) end
  class.forward = function(self, x) return torch[fn](x, self.dim) end
  class.extra_repr = function(self) return "dim=" .. self.dim end
  nn[name] = class
end

-- nn.Dropout([p = 0.5]) or {p =}: F.dropout in training, the input itself in eval().
nn.Dropout = Module:extend("Dropout")
local DROPOUT_OPTIONS = declare_options("nn.Dropout", {"p"})
function nn.Dropout:init(...)
  local a = parse_args("Dropout", 0, DROPOUT_OPTIONS, 1, ...)
  self.p = check_number("Dropout", "p", a.p, 0.5)
  if self.p < 0 or self.p > 1 then fail("Dropout: p must be in [0, 1], got " .. describe(self.p)) end
end
function nn.Dropout:forward(x) return F.dropout(x, self.p, self.training) end
function nn.Dropout:extra_repr() return "p=" .. py_repr(self.p) .. ", inplace=False" end

-- nn.BatchNorm1d(C) ([N, C] or [N, C, L]) and nn.BatchNorm2d(C) ([N, C, H, W]), options
-- {eps = 1e-5, momentum = 0.1, affine = true, track_running_stats = true, dtype =}.
-- momentum = false is PyTorch's None: the running stats are the cumulative average.
-- Buffers running_mean (zeros), running_var (ones), num_batches_tracked (int64 0-d); weight ones,
-- bias zeros. In training (or without running stats) the batch's statistics normalise and the
-- running stats are updated; in eval() the running stats normalise.
local function batch_norm_class(name, accepted_dims)
  local class = Module:extend(name)
  local declared = declare_options("nn." .. name, {"eps", "momentum", "affine", "track_running_stats", "device", "dtype"})
  function class:init(num_features, opts)
    num_features = check_integer(name, "num_features", num_features, 1)
    opts = check_options(declared, opts, "{momentum = 0.01}")
    local dtype = check_dtype(name, opts.dtype, opts.device)
    self.num_features = num_features
    self.eps = check_number(name, "eps", opts.eps, 1e-5)
    if opts.momentum == false then self.momentum = false else self.momentum = check_number(name, "momentum", opts.momentum, 0.1) end
    self.affine = check_boolean(name, "affine", opts.affine, true)
    self.track_running_stats = check_boolean(name, "track_running_stats", opts.track_running_stats, true)
    if self.affine then
      self.weight = init_parameter(name, function() return torch.ones(num_features, {dtype = dtype}) end)
      self.bias = init_parameter(name, function() return torch.zeros(num_features, {dtype = dtype}) end)
    end
    if self.track_running_stats then
      self:register_buffer("running_mean", torch.zeros(num_features, {dtype = dtype}))
      self:register_buffer("running_var", torch.ones(num_features, {dtype = dtype}))
      self:register_buffer("num_batches_tracked", torch.zeros({}, {dtype = "int64"}))
    end
    -- PyTorch's None for what the options leave out: bn.weight, bn.running_mean read nil
    for _, key in ipairs({"weight", "bias"}) do if self[key] == nil then self:register_parameter(key, nil) end end
    for _, key in ipairs({"running_mean", "running_var", "num_batches_tracked"}) do
      if self[key] == nil then self:register_buffer(key, nil) end
    end
    place_on_device(self, opts.device)
  end
  function class:forward(x)
    if not torch.is_tensor(x) or not accepted_dims[x:dim()] then
      fail(string.format("%s: expected %s input, got %s", name, accepted_dims.text, torch.is_tensor(x) and tostring(x.shape) or describe(x)))
    end
    local factor = self.momentum or 0.0
    if self.training and self.track_running_stats then
      torch.no_grad(function() self.num_batches_tracked:add_(1) end)
      if self.momentum == false then factor = 1 / self.num_batches_tracked:item() end
    end
    local use_batch_stats = self.training or not self.track_running_stats
    local tracked = not self.training or self.track_running_stats
    return F.batch_norm(x, tracked and self.running_mean or nil, tracked and self.running_var or nil, self.weight, self.bias,
                        use_batch_stats, factor, self.eps)
  end
  function class:extra_repr()
    return string.format("%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s", self.num_features, py_repr(self.eps),
                         self.momentum == false and "None" or py_repr(self.momentum), py_repr(self.affine),
                         py_repr(self.track_running_stats))
  end
  nn[name] = class
end
batch_norm_class("BatchNorm1d", {[2] = true, [3] = true, text = "2D or 3D ([N, C] or [N, C, L])"})
batch_norm_class("BatchNorm2d", {[4] = true, text = "4D ([N, C, H, W])"})

-- nn.LayerNorm(normalized_shape [, {eps = 1e-5, elementwise_affine = true, bias = true, dtype =}]):
-- over the last dims; weight ones, bias zeros, of normalized_shape.
nn.LayerNorm = Module:extend("LayerNorm")
local LAYER_NORM_OPTIONS = declare_options("nn.LayerNorm", {"eps", "elementwise_affine", "bias", "device", "dtype"})
function nn.LayerNorm:init(normalized_shape, opts)
  local shape = size_list("LayerNorm", "normalized_shape", normalized_shape)
  opts = check_options(LAYER_NORM_OPTIONS, opts, "{eps = 1e-6}")
  local dtype = check_dtype("LayerNorm", opts.dtype, opts.device)
  rawset(self, "normalized_shape", shape)
  self.eps = check_number("LayerNorm", "eps", opts.eps, 1e-5)
  self.elementwise_affine = check_boolean("LayerNorm", "elementwise_affine", opts.elementwise_affine, true)
  if self.elementwise_affine then
    self.weight = init_parameter("LayerNorm", function() return torch.ones(shape, {dtype = dtype}) end)
    if check_boolean("LayerNorm", "bias", opts.bias, true) then
      self.bias = init_parameter("LayerNorm", function() return torch.zeros(shape, {dtype = dtype}) end)
    end
  end
  for _, key in ipairs({"weight", "bias"}) do if self[key] == nil then self:register_parameter(key, nil) end end
  place_on_device(self, opts.device)
end
function nn.LayerNorm:forward(x) return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps) end
function nn.LayerNorm:extra_repr()
  return string.format("%s, eps=%s, elementwise_affine=%s", py_size(self.normalized_shape), py_repr(self.eps),
                       py_repr(self.elementwise_affine))
end

-- nn.Embedding(num_embeddings, embedding_dim [, {padding_idx =, dtype =}]): weight N(0, 1); the
-- row padding_idx (1-based) starts at zero and gets no gradient, as PyTorch's.
nn.Embedding = Module:extend("Embedding")
local EMBEDDING_OPTIONS = declare_options("nn.Embedding", {"padding_idx", "device", "dtype"})
function nn.Embedding:init(num_embeddings, embedding_dim, opts)
  num_embeddings = check_integer("Embedding", "num_embeddings", num_embeddings, 1)
  embedding_dim = check_integer("Embedding", "embedding_dim", embedding_dim, 1)
  opts = check_options(EMBEDDING_OPTIONS, opts, "{padding_idx = 1}")
  local dtype = check_dtype("Embedding", opts.dtype, opts.device)
  self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
  if opts.padding_idx ~= nil then
    local index = check_integer("Embedding", "padding_idx", opts.padding_idx, -num_embeddings)
    if index == 0 or index > num_embeddings then
      fail(string.format("Embedding: padding_idx must be in 1..%d (or negative from the end), got %d", num_embeddings, index))
    end
    self.padding_idx = index < 0 and num_embeddings + 1 + index or index
  end
  self.weight = init_parameter("Embedding", function()
    local w = torch.randn(num_embeddings, embedding_dim, {dtype = dtype})
    if self.padding_idx then w[self.padding_idx]:fill_(0) end
    return w
  end)
  place_on_device(self, opts.device)
end
function nn.Embedding:forward(input)
  local weight = self.weight
  if self.padding_idx then   -- the padding row's values, without its gradient
    local is_padding = torch.arange(1, self.num_embeddings + 1, {device = weight.device}):eq(self.padding_idx):unsqueeze(2)
    weight = torch.where(is_padding, weight:detach(), weight)
  end
  return F.embedding(input, weight)
end
function nn.Embedding:extra_repr()
  return string.format("%d, %d", self.num_embeddings, self.embedding_dim) ..
         (self.padding_idx and ", padding_idx=" .. self.padding_idx or "")
end

-- nn.AvgPool2d(kernel_size [, stride] [, {stride =, padding = 0, ceil_mode =, count_include_pad = true,
-- divisor_override =}]): F.avg_pool2d.
nn.AvgPool2d = Module:extend("AvgPool2d")
local AVG_POOL2D_OPTIONS = declare_options("nn.AvgPool2d", {"stride", "padding", "ceil_mode", "count_include_pad",
                                                            "divisor_override"})
function nn.AvgPool2d:init(kernel_size, stride, opts)
  if opts == nil and is_options(stride) then stride, opts = nil, stride end
  check_pair("AvgPool2d", "kernel_size", kernel_size, 1)
  opts = check_options(AVG_POOL2D_OPTIONS, opts, "{stride = 2, padding = 1}")
  if stride ~= nil and opts.stride ~= nil then fail("AvgPool2d: stride is given twice: as argument 2 and as an option") end
  rawset(self, "kernel_size", kernel_size)
  rawset(self, "stride", stride or opts.stride or kernel_size)
  rawset(self, "padding", opts.padding or 0)
  rawset(self, "pool_options", {stride = self.stride, padding = self.padding, ceil_mode = opts.ceil_mode,
                                count_include_pad = opts.count_include_pad, divisor_override = opts.divisor_override})
  check_pair("AvgPool2d", "stride", self.stride, 1)
  check_pair("AvgPool2d", "padding", self.padding, 0)
end
function nn.AvgPool2d:forward(x) return F.avg_pool2d(x, self.kernel_size, self.pool_options) end
function nn.AvgPool2d:extra_repr()
  return string.format("kernel_size=%s, stride=%s, padding=%s", py_size(self.kernel_size), py_size(self.stride),
                       py_size(self.padding))
end

-- nn.AdaptiveAvgPool2d(output_size): F.adaptive_avg_pool2d; output_size a number or {h, w}.
nn.AdaptiveAvgPool2d = Module:extend("AdaptiveAvgPool2d")
function nn.AdaptiveAvgPool2d:init(output_size)
  if type(output_size) == "table" then
    for i = 1, 2 do if output_size[i] ~= nil then check_integer("AdaptiveAvgPool2d", "output_size", output_size[i], 1) end end
  else
    check_integer("AdaptiveAvgPool2d", "output_size", output_size, 1)
  end
  rawset(self, "output_size", output_size)
end
function nn.AdaptiveAvgPool2d:forward(x) return F.adaptive_avg_pool2d(x, self.output_size) end
function nn.AdaptiveAvgPool2d:extra_repr()
  if type(self.output_size) ~= "table" then return "output_size=" .. self.output_size end
  return string.format("output_size=(%s, %s)", py_repr(self.output_size[1]), py_repr(self.output_size[2]))
end

-- ============================================================================================
-- Losses as modules: criterion(input, target) calls the F form with the options given to the
-- constructor (positional ones as PyTorch's: nn.CrossEntropyLoss(weight), nn.MultiMarginLoss(p,
-- margin, weight)). Tensors (weight, pos_weight) are buffers, as PyTorch's.

-- {class, F name, the parameters by position, all the parameters}
local loss_modules = {
  {"L1Loss", "l1_loss", 0, {"reduction"}},
  {"MSELoss", "mse_loss", 0, {"reduction"}},
  {"SmoothL1Loss", "smooth_l1_loss", 0, {"reduction", "beta"}},
  {"BCELoss", "binary_cross_entropy", 1, {"weight", "reduction"}},
  {"BCEWithLogitsLoss", "binary_cross_entropy_with_logits", 1, {"weight", "reduction", "pos_weight"}},
  {"CrossEntropyLoss", "cross_entropy", 1, {"weight", "ignore_index", "reduction", "label_smoothing"}},
  {"NLLLoss", "nll_loss", 1, {"weight", "ignore_index", "reduction"}},
  {"MultiMarginLoss", "multi_margin_loss", 3, {"p", "margin", "weight", "reduction"}},
}
-- PyTorch's defaults of the options that are fields of a loss module (crit.ignore_index is -100).
local LOSS_DEFAULTS = {ignore_index = -100, label_smoothing = 0.0, beta = 1.0, p = 1, margin = 1}
for _, spec in ipairs(loss_modules) do
  local name, fname, n_positional, names = table.unpack(spec)
  local class = Module:extend(name)
  names = declare_options("nn." .. name, names)
  function class:init(...)
    local first = ...
    if n_positional == 0 and first ~= nil and type(first) ~= "table" then
      fail(string.format("%s: options must be a table like {reduction = \"sum\"}, got %s", name, describe(first)))
    end
    local a = parse_args(name, 0, names, n_positional, ...)
    self.reduction = check_reduction(name, a.reduction)
    for _, key in ipairs(names) do
      local value = a[key]
      if key == "weight" or key == "pos_weight" then
        check_tensor(name, key, value, true)
        self:register_buffer(key, value)
      elseif key ~= "reduction" then
        self[key] = value == nil and LOSS_DEFAULTS[key] or value
      end
    end
  end
  -- The fields as they are now (crit.ignore_index = 0 after construction counts, as in PyTorch);
  -- a field at PyTorch's default is left out, so that F takes its own fast path.
  function class:forward(input, target)
    local opts = {reduction = self.reduction, weight = self.weight, pos_weight = self.pos_weight}
    for _, key in ipairs(names) do
      if LOSS_DEFAULTS[key] ~= nil and self[key] ~= LOSS_DEFAULTS[key] then opts[key] = self[key] end
    end
    return F[fname](input, target, opts)
  end
  nn[name] = class
end

return nn
