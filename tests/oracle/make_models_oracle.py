"""make_models_oracle.py: PyTorch's numbers for two training steps of the model scripts'
architectures at a tiny fixed size, for tests/lua/test_models_oracle.lua.

    /usr/bin/python3 tests/oracle/make_models_oracle.py tests/oracle/models

For each model (the architecture of scripts/models/<name>_model.lua):
    <name>.npz    the float32 weights (state_dict keys), the batch `input` and `labels` (0-based),
                  as numpy.savez writes them
and models_oracle_data.lua holds, for float32 and float64 (the same weights converted), two
training steps on that batch (Adam, train mode): the loss, each parameter's gradient, and every
parameter and buffer after the optimizer step. `near_zero_grads` names the parameters whose gradient
is zero up to rounding (a conv bias before BatchNorm): Adam's first step turns that float32 noise
into a +-lr update, so the test compares those parameters in float64 only.

    spiral_mlp: Linear(2, 8) -> ReLU -> Linear(8, 3); 12 points; Adam lr 0.01
    shapes_cnn: [Conv2d(c, 3x3, padding 1) -> BatchNorm2d -> ReLU -> MaxPool2d(2)] x 2 with
                c = 2, 3 -> Flatten -> Dropout(0) -> Linear(3 * 2 * 2, 3); 4 images of 8x8;
                Adam lr 3e-3 (Dropout p = 0: its random mask is not PyTorch's)
"""
import copy
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS = 2


def spiral_mlp():
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 3))
    x = torch.randn(12, 2)
    labels = torch.arange(12) % 3
    return model, x, labels, 0.01


def shapes_cnn():
    model = nn.Sequential(
        nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.0), nn.Linear(3 * 2 * 2, 3))
    x = torch.randn(4, 1, 8, 8)
    labels = torch.tensor([0, 1, 2, 1])
    return model, x, labels, 3e-3


def lua(v):
    if isinstance(v, list):
        return "{" + ", ".join(lua(e) for e in v) + "}"
    if isinstance(v, int):
        return str(v)
    return "%.17g" % v


def lua_named(values):
    return "{" + ", ".join('["%s"] = %s' % (k, lua(v)) for k, v in values.items()) + "}"


def train_steps(model, x, labels, lr, dtype):
    model = copy.deepcopy(model).to(dtype)
    model.train()
    x = x.to(dtype)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    steps = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), labels)
        loss.backward()
        grads = {k: p.grad.tolist() for k, p in model.named_parameters()}
        opt.step()
        after = {k: v.tolist() for k, v in model.state_dict().items()}
        steps.append("{loss = %s,\n      grads = %s,\n      after = %s}" % (lua(loss.item()), lua_named(grads), lua_named(after)))
    return "{" + ",\n     ".join(steps) + "}", grads


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.manual_seed(0)
    entries = []
    for name, make in (("spiral_mlp", spiral_mlp), ("shapes_cnn", shapes_cnn)):
        model, x, labels, lr = make()
        arrays = {k: v.numpy() for k, v in model.state_dict().items()}
        arrays["input"] = x.numpy()
        arrays["labels"] = labels.numpy()
        np.savez(f"{out}/{name}.npz", **arrays)
        f32, grads32 = train_steps(model, x, labels, lr, torch.float32)
        f64, _ = train_steps(model, x, labels, lr, torch.float64)
        largest = max(max(abs(g) for g in np.ravel(v)) for v in grads32.values())
        near_zero = [k for k, v in grads32.items() if max(abs(g) for g in np.ravel(v)) < 1e-5 * largest]
        entries.append("%s = {lr = %s, near_zero_grads = {%s},\n  float32 = %s,\n  float64 = %s}" % (
            name, lua(lr), ", ".join('"%s"' % k for k in near_zero), f32, f64))
    with open(f"{out}/models_oracle_data.lua", "w") as f:
        f.write("-- made by tests/oracle/make_models_oracle.py (PyTorch %s): do not edit\n" % torch.__version__)
        f.write("return {\n" + ",\n".join(entries) + "\n}\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
