"""lua_literal.py: Python and torch values written as Lua literals, for the oracle scripts that
print their data as a Lua file (make_nn_oracle.py, make_rnn_oracle.py, make_attention_oracle.py)."""
import torch


def lua_value(x):
    """A tensor or a number as a Lua literal (nested tables, 17 significant digits)."""
    if isinstance(x, torch.Tensor):
        x = x.detach()
        if x.dim() == 0:
            return lua_value(x.item())
        return "{" + ", ".join(lua_value(v) for v in x) + "}"
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    return repr(float(x)).replace("inf", "math.huge")


def lua_string(s):
    """A Python string as a Lua string literal."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
