"""make_nn_oracle.py: PyTorch's numbers and texts for tests/lua/test_nn_modules.lua.

Run: /usr/bin/python3 tests/oracle/make_nn_oracle.py > tests/oracle/nn_oracle_data.lua

For each module case: fixed float64 parameters and buffers (its state_dict, written out), an
input, a fixed random cotangent R; PyTorch's output, the gradients of sum(output * R) for the
parameters and the input, and the buffers after the forward (BatchNorm's running stats). Each case
carries the Lua constructor that builds the same module (`lua`), with 1-based dims and indices.
Then the state_dict key lists and print(model) texts of a few nested models (`models`).
"""
import torch
import torch.nn as nn

from lua_literal import lua_string, lua_value

torch.manual_seed(0)
DT = torch.float64


def lua_dtype(t):
    return {torch.float64: "float64", torch.float32: "float32", torch.int64: "int64"}[t.dtype]


def fill_state(module):
    """Parameters and float buffers set to fixed random values (weight-like values near 1 for norms)."""
    with torch.no_grad():
        for name, t in module.state_dict().items():
            if t.dtype == torch.int64:
                continue
            values = torch.randn(t.shape, dtype=DT) * 0.5
            if name.endswith("running_var"):
                values = values.abs() + 0.5
            t.copy_(values)


def tensor_entry(t):
    return "{dtype = %s, shape = {%s}, values = %s}" % (
        lua_string(lua_dtype(t)), ", ".join(str(n) for n in t.shape), lua_value(t.reshape(-1) if t.dim() > 0 else t))


def case(name, lua, module, x, train=True, integer_input=False, target=None, steps=1):
    """One module case: `steps` forwards in train (or eval) mode, the last one differentiated."""
    module = module.to(DT)
    fill_state(module)
    state = {k: v.clone() for k, v in module.state_dict().items()}
    module.train(train)
    if not integer_input:
        x = x.to(DT).requires_grad_(True)
    for _ in range(steps - 1):
        module(x) if target is None else module(x, target)
    out = module(x) if target is None else module(x, target)
    R = torch.randn(out.shape, dtype=DT)
    (out * R).sum().backward()
    lines = ["  {name = %s, lua = %s, train = %s, steps = %d," % (lua_string(name), lua_string(lua), lua_value(train), steps)]
    lines.append("   input = %s," % tensor_entry(x))
    if target is not None:
        lines.append("   target = %s," % tensor_entry(target))
    lines.append("   state = {%s}," % ", ".join("[%s] = %s" % (lua_string(k), tensor_entry(v)) for k, v in state.items()))
    lines.append("   R = %s," % tensor_entry(R))
    lines.append("   output = %s," % tensor_entry(out))
    grads = {n: p.grad for n, p in module.named_parameters() if p.grad is not None}
    lines.append("   grads = {%s}," % ", ".join("[%s] = %s" % (lua_string(k), tensor_entry(v)) for k, v in grads.items()))
    if not integer_input:
        lines.append("   input_grad = %s," % tensor_entry(x.grad))
    after = {k: v for k, v in module.state_dict().items() if "running" in k or "num_batches" in k}
    lines.append("   buffers_after = {%s}}," % ", ".join("[%s] = %s" % (lua_string(k), tensor_entry(v)) for k, v in after.items()))
    return "\n".join(lines)


def cases():
    r = lambda *shape: torch.randn(*shape, dtype=DT)
    out = []
    out.append(case("Linear", "nn.Linear(3, 2)", nn.Linear(3, 2), r(4, 3)))
    out.append(case("Conv2d", "nn.Conv2d(2, 3, 3, {padding = 1})", nn.Conv2d(2, 3, 3, padding=1), r(2, 2, 4, 4)))
    out.append(case("BatchNorm1d train", "nn.BatchNorm1d(3)", nn.BatchNorm1d(3), r(5, 3)))
    out.append(case("BatchNorm1d 3d train", "nn.BatchNorm1d(3, {momentum = 0.3})", nn.BatchNorm1d(3, momentum=0.3), r(4, 3, 2)))
    out.append(case("BatchNorm1d eval", "nn.BatchNorm1d(3)", nn.BatchNorm1d(3), r(5, 3), train=False))
    out.append(case("BatchNorm1d cumulative", "nn.BatchNorm1d(3, {momentum = false})", nn.BatchNorm1d(3, momentum=None), r(5, 3), steps=3))
    out.append(case("BatchNorm1d no affine", "nn.BatchNorm1d(3, {affine = false})", nn.BatchNorm1d(3, affine=False), r(5, 3)))
    out.append(case("BatchNorm1d untracked eval", "nn.BatchNorm1d(3, {track_running_stats = false})",
                    nn.BatchNorm1d(3, track_running_stats=False), r(5, 3), train=False))
    out.append(case("BatchNorm2d train", "nn.BatchNorm2d(2, {eps = 1e-3})", nn.BatchNorm2d(2, eps=1e-3), r(3, 2, 3, 3), steps=2))
    out.append(case("BatchNorm2d eval", "nn.BatchNorm2d(2)", nn.BatchNorm2d(2), r(3, 2, 3, 3), train=False))
    out.append(case("LayerNorm", "nn.LayerNorm(4)", nn.LayerNorm(4), r(3, 4)))
    out.append(case("LayerNorm 2 dims", "nn.LayerNorm({2, 3}, {eps = 1e-6})", nn.LayerNorm([2, 3], eps=1e-6), r(2, 2, 3)))
    idx = torch.tensor([[0, 2, 1], [3, 2, 2]])
    out.append(case("Embedding", "nn.Embedding(5, 3)", nn.Embedding(5, 3), idx, integer_input=True))
    emb = nn.Embedding(5, 3, padding_idx=2)
    out.append(case("Embedding padding_idx", "nn.Embedding(5, 3, {padding_idx = 3})", emb, idx, integer_input=True))
    out.append(case("Dropout eval", "nn.Dropout(0.4)", nn.Dropout(0.4), r(3, 4), train=False))
    out.append(case("Dropout p=0", "nn.Dropout(0)", nn.Dropout(0.0), r(3, 4)))
    out.append(case("AvgPool2d", "nn.AvgPool2d(2, 1)", nn.AvgPool2d(2, 1), r(1, 2, 4, 4)))
    out.append(case("AvgPool2d padding", "nn.AvgPool2d(3, {stride = 2, padding = 1, count_include_pad = false})",
                    nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), r(2, 1, 5, 5)))
    out.append(case("AdaptiveAvgPool2d uneven", "nn.AdaptiveAvgPool2d({3, 2})", nn.AdaptiveAvgPool2d((3, 2)), r(2, 2, 5, 7)))
    out.append(case("AdaptiveAvgPool2d even", "nn.AdaptiveAvgPool2d(2)", nn.AdaptiveAvgPool2d(2), r(1, 3, 4, 6)))
    out.append(case("AdaptiveAvgPool2d 1", "nn.AdaptiveAvgPool2d(1)", nn.AdaptiveAvgPool2d(1), r(2, 3, 3, 5)))
    out.append(case("Flatten", "nn.Flatten()", nn.Flatten(), r(2, 3, 2)))
    out.append(case("Unflatten", "nn.Unflatten(2, {2, 3})", nn.Unflatten(1, (2, 3)), r(2, 6)))
    out.append(case("Identity", "nn.Identity(7)", nn.Identity(7), r(2, 3)))
    out.append(case("ReLU", "nn.ReLU()", nn.ReLU(), r(3, 4)))
    out.append(case("LeakyReLU", "nn.LeakyReLU(0.2)", nn.LeakyReLU(0.2), r(3, 4)))
    out.append(case("GELU", "nn.GELU()", nn.GELU(), r(3, 4)))
    out.append(case("GELU tanh", "nn.GELU(\"tanh\")", nn.GELU("tanh"), r(3, 4)))
    out.append(case("SiLU", "nn.SiLU()", nn.SiLU(), r(3, 4)))
    out.append(case("Tanh", "nn.Tanh()", nn.Tanh(), r(3, 4)))
    out.append(case("Sigmoid", "nn.Sigmoid()", nn.Sigmoid(), r(3, 4)))
    out.append(case("Softmax", "nn.Softmax(2)", nn.Softmax(1), r(3, 4)))
    out.append(case("LogSoftmax", "nn.LogSoftmax(1)", nn.LogSoftmax(0), r(3, 4)))
    seq = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Dropout(0.0), nn.Linear(4, 2))
    out.append(case("Sequential", "nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Dropout(0), nn.Linear(4, 2))",
                    seq, r(5, 3)))
    # losses: target given; 1-based class labels in Lua (the test adds 1 to int64 targets)
    labels = torch.tensor([0, 2, 1, 2])
    w3 = "torch.tensor({0.5, 2.0, 1.5}, {dtype = \"float64\"})"
    w3t = torch.tensor([0.5, 2.0, 1.5], dtype=DT)
    p = torch.rand(4, 3, dtype=DT) * 0.8 + 0.1
    y01 = torch.rand(4, 3, dtype=DT)
    out.append(case("MSELoss", "nn.MSELoss()", nn.MSELoss(), r(4, 3), target=r(4, 3)))
    out.append(case("MSELoss sum", "nn.MSELoss({reduction = \"sum\"})", nn.MSELoss(reduction="sum"), r(4, 3), target=r(4, 3)))
    out.append(case("L1Loss none", "nn.L1Loss({reduction = \"none\"})", nn.L1Loss(reduction="none"), r(4, 3), target=r(4, 3)))
    out.append(case("SmoothL1Loss", "nn.SmoothL1Loss({beta = 0.5})", nn.SmoothL1Loss(beta=0.5), r(4, 3), target=r(4, 3)))
    out.append(case("BCELoss", "nn.BCELoss(" + w3 + ")", nn.BCELoss(weight=w3t), p, target=y01))
    out.append(case("BCEWithLogitsLoss", "nn.BCEWithLogitsLoss({pos_weight = " + w3 + "})",
                    nn.BCEWithLogitsLoss(pos_weight=w3t), r(4, 3), target=y01))
    out.append(case("CrossEntropyLoss", "nn.CrossEntropyLoss()", nn.CrossEntropyLoss(), r(4, 3), target=labels))
    out.append(case("CrossEntropyLoss options", "nn.CrossEntropyLoss(" + w3 + ", {label_smoothing = 0.1})",
                    nn.CrossEntropyLoss(weight=w3t, label_smoothing=0.1), r(4, 3), target=labels))
    out.append(case("NLLLoss", "nn.NLLLoss({reduction = \"sum\"})", nn.NLLLoss(reduction="sum"),
                    torch.log_softmax(r(4, 3), 1), target=labels))
    out.append(case("MultiMarginLoss", "nn.MultiMarginLoss(2, 0.5)", nn.MultiMarginLoss(p=2, margin=0.5), r(4, 3), target=labels))
    return out


class Net(nn.Module):
    """A custom module with a child, a container of children and a buffer (in Lua: test_nn_modules.lua)."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(2))
        self.body = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
        self.register_buffer("mask", torch.ones(4))
        self.heads = nn.ModuleList([nn.Linear(4, 1), nn.Linear(4, 2, bias=False)])
        self.norms = nn.ModuleDict({"ln": nn.LayerNorm(4), "bn": nn.BatchNorm1d(4, momentum=None)})


def models():
    made = {
        "nested_sequential": nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Sequential(nn.Tanh())),
                                           nn.Linear(3, 1)),
        "module_list": nn.ModuleList([nn.Linear(2, 2), nn.ModuleList([nn.Conv2d(1, 2, 3, stride=2, bias=False)])]),
        "module_dict": nn.ModuleDict({"conv": nn.Conv2d(1, 4, (3, 5), padding=1), "pool": nn.MaxPool2d(2),
                                      "avg": nn.AvgPool2d(2), "emb": nn.Embedding(10, 3, padding_idx=0)}),
        "custom": Net(),
        "cnn": nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.25),
                             nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(8, 10), nn.GELU(), nn.LeakyReLU(),
                             nn.SiLU(), nn.Identity(), nn.Sigmoid(), nn.CrossEntropyLoss(), nn.MSELoss()),
    }
    lines = []
    for name, model in made.items():
        keys = ", ".join(lua_string(k) for k in model.state_dict().keys())
        params = ", ".join(lua_string(k) for k, _ in model.named_parameters())
        lines.append("  %s = {state_dict_keys = {%s},\n    parameter_names = {%s},\n    n_parameters = %d,\n    printed = %s}," % (
            name, keys, params, sum(p.numel() for p in model.parameters()), lua_string(str(model))))
    return lines


print("-- Made by tests/oracle/make_nn_oracle.py with PyTorch %s; do not edit." % torch.__version__)
print("return {\ncases = {")
print("\n".join(cases()))
print("},\nmodels = {")
print("\n".join(models()))
print("}}")
