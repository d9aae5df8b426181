"""make_gradcheck_oracle.py: PyTorch's numbers for tests/lua/test_gradcheck_oracle.lua
(torch.autograd.gradcheck and its numerical Jacobian).

Run: python3 tests/oracle/make_gradcheck_oracle.py > tests/oracle/gradcheck_oracle_data.lua

Each case: a function (written the same way in the Lua test, by the case's name), float64 inputs
that require grad, PyTorch's verdict `torch.autograd.gradcheck(fn, inputs, raise_exception=False)`
(default eps 1e-6, atol 1e-5, rtol 1e-3), and PyTorch's numerical Jacobian of the same check
(torch.autograd.gradcheck's get_numerical_jacobian, eps 1e-6): for input i and output j a matrix
[numel of input i, numel of output j], row-major.
"""
import sys

import torch

from lua_literal import lua_string, lua_value

gradcheck_module = sys.modules["torch.autograd.gradcheck"]
torch.manual_seed(0)
DT = torch.float64


class Cube(torch.autograd.Function):
    """x^3 with a correct backward (3 x^2)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.pow(3)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.pow(2) * 3


class BadCube(torch.autograd.Function):
    """x^3 with a WRONG backward: 3 x instead of 3 x^2."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.pow(3)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x * 3


class ScaledSwap(torch.autograd.Function):
    """(a, b) -> (2 b, a * b) with a WRONG gradient for b's second use (a missing)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return b * 2, a * b

    @staticmethod
    def backward(ctx, g1, g2):
        a, b = ctx.saved_tensors
        return g2 * b, g1 * 2 + g2


CASES = {
    # the example: a layer and an elementwise term
    "tanh_mm_sin": (lambda x, W: torch.tanh(x @ W) + torch.sin(x).sum(), [(3, 4), (4, 2)]),
    "cube": (lambda x: Cube.apply(x), [(2, 3)]),
    "bad_cube": (lambda x: BadCube.apply(x), [(2, 3)]),
    "scaled_swap": (lambda a, b: ScaledSwap.apply(a, b), [(3,), (3,)]),
    # two outputs, one of them 0-d
    "softmax_and_norm": (lambda x: (torch.softmax(x, 1), (x * x).sum()), [(2, 4)]),
}


def as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def main():
    print("-- gradcheck_oracle_data.lua: made by tests/oracle/make_gradcheck_oracle.py (PyTorch %s); do not edit."
          % torch.__version__)
    print("return {")
    for name, (fn, shapes) in CASES.items():
        inputs = tuple(torch.randn(s, dtype=DT).requires_grad_() for s in shapes)
        verdict = torch.autograd.gradcheck(fn, inputs, raise_exception=False)
        outputs = as_tuple(fn(*inputs))
        jacobians = gradcheck_module._get_numerical_jacobian(fn, inputs, eps=1e-6)
        print("  {name = %s, passes = %s," % (lua_string(name), "true" if verdict else "false"))
        print("   inputs = {%s}," % ", ".join(
            "{shape = {%s}, values = %s}" % (", ".join(str(n) for n in t.shape), lua_value(t.reshape(-1)))
            for t in inputs))
        print("   outputs = {%s}," % ", ".join("{%s}" % ", ".join(str(n) for n in o.shape) for o in outputs))
        rows = []
        for per_input in jacobians:   # over inputs, each a tuple over outputs: [numel in, numel out]
            rows.append("{%s}" % ", ".join(lua_value(j.reshape(-1)) for j in per_input))
        print("   numerical = {%s}," % ", ".join(rows))
        print("  },")
    print("}")


if __name__ == "__main__":
    main()
