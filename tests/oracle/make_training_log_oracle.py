#!/usr/bin/env python3
"""make_training_log_oracle.py: what the training log must hold after 4 Adam steps, from PyTorch.

    python3 tests/oracle/make_training_log_oracle.py     (a python3 with torch: pip's, or Debian's python3-torch)

writes tests/oracle/training_log_oracle_data.lua, which tests/lua/test_training_log_oracle.lua
checks the viewer's training log against (docs/viewer.md, The Training window). A float32
Sequential(Linear(3, 5), Tanh, Linear(5, 2)) with fixed weights is trained on fixed data with an
MSE loss and Adam (lr 0.05, weight decay 0.01); per step and parameter it stores the loss, the
gradient's norm and the update ratio |w_after - w_before| / |w_before|, the three numbers the
optimizer's step() logs.
"""
import os
import torch

from lua_literal import lua_value, lua_string

STEPS = 4
torch.manual_seed(18)
model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
initial = {}
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.randn(p.shape) * 0.5)
        initial[name] = p.detach().clone()
x = torch.randn(6, 3)
y = torch.randn(6, 2)
opt = torch.optim.Adam(model.parameters(), lr=0.05, weight_decay=0.01)

names = [name for name, _ in model.named_parameters()]
losses, grad_norms, ratios = [], {n: [] for n in names}, {n: [] for n in names}
for _ in range(STEPS):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    losses.append(loss.item())
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for n, p in model.named_parameters():
        grad_norms[n].append(p.grad.double().norm().item())
    opt.step()
    for n, p in model.named_parameters():
        ratios[n].append((p.detach().double() - before[n].double()).norm().item() / before[n].double().norm().item())

lines = ["-- training_log_oracle_data.lua: made by make_training_log_oracle.py with PyTorch " + torch.__version__ + "; do not edit.",
         "return {"]
lines.append("  names = {" + ", ".join(lua_string(n) for n in names) + "},")
lines.append("  shapes = {" + ", ".join("{" + ", ".join(str(d) for d in initial[n].shape) + "}" for n in names) + "},")
lines.append("  initial = {" + ", ".join(lua_value(initial[n].flatten()) for n in names) + "},")
lines.append("  x = " + lua_value(x) + ",")
lines.append("  y = " + lua_value(y) + ",")
lines.append("  loss = " + lua_value(torch.tensor(losses, dtype=torch.float64)) + ",")
lines.append("  grad_norm = {" + ", ".join(lua_value(torch.tensor(grad_norms[n], dtype=torch.float64)) for n in names) + "},")
lines.append("  update_ratio = {" + ", ".join(lua_value(torch.tensor(ratios[n], dtype=torch.float64)) for n in names) + "},")
lines.append("}")
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "training_log_oracle_data.lua")
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
print("wrote", out)
