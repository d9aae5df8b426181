"""make_animate_oracle.py: PyTorch's numbers for the frames of tests/lua/test_animate.lua.

Run: python3 tests/oracle/make_animate_oracle.py > tests/oracle/animate_oracle_data.lua

The lecture's RNN cell (scripts/rnn_cell.lua) in float64 on fixed random inputs:
    h2h = W_h @ prev_h.T,  i2h = W_x @ x.T,  next_h = tanh(h2h + i2h),  loss = next_h.sum()
Recorded: the inputs; min, max, mean and norm of each forward op's value in record order (prev_h.T,
h2h, x.T, i2h, h2h + i2h, next_h, loss), of the gradient arriving at each node whose backward rule
runs, in the order PyTorch's (and tapedeck's) backward pass visits them (loss, next_h, h2h + i2h,
i2h, h2h), and of W_h.grad: the numbers the animation's panel shows frame by frame.
"""
import torch

from lua_literal import lua_value

torch.manual_seed(0)
DT = torch.float64


def tensor_entry(t):
    return "{shape = {%s}, values = %s}" % (", ".join(str(n) for n in t.shape), lua_value(t.detach().reshape(-1)))


def stats(t):
    t = t.detach()
    return "{min = %s, max = %s, mean = %s, norm = %s}" % (
        lua_value(t.min()), lua_value(t.max()), lua_value(t.mean()), lua_value(t.norm()))


W_h = (torch.randn(6, 6, dtype=DT) * 0.5).requires_grad_()
W_x = (torch.randn(6, 4, dtype=DT) * 0.5).requires_grad_()
x = torch.randn(1, 4, dtype=DT)
prev_h = torch.randn(1, 6, dtype=DT)

prev_h_t = prev_h.t()
h2h = W_h @ prev_h_t
x_t = x.t()
i2h = W_x @ x_t
s = h2h + i2h
next_h = s.tanh()
loss = next_h.sum()
for t in (h2h, i2h, s, next_h, loss):
    t.retain_grad()
loss.backward()

print("-- made by tests/oracle/make_animate_oracle.py (PyTorch %s); do not edit" % torch.__version__)
print("return {")
print("  W_h = %s," % tensor_entry(W_h))
print("  W_x = %s," % tensor_entry(W_x))
print("  x = %s," % tensor_entry(x))
print("  prev_h = %s," % tensor_entry(prev_h))
print("  forward = {%s}," % ", ".join(stats(t) for t in (prev_h_t, h2h, x_t, i2h, s, next_h, loss)))
print("  backward = {%s}," % ", ".join(stats(t.grad) for t in (loss, next_h, s, i2h, h2h)))
print("  W_h_grad = %s," % stats(W_h.grad))
print("}")
