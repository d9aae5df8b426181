"""make_rnn_oracle.py: PyTorch's numbers for tests/lua/test_rnn_oracle.lua (the recurrent modules).

Run: /usr/bin/python3 tests/oracle/make_rnn_oracle.py > tests/oracle/rnn_oracle_data.lua

Each case: a module (RNN, LSTM, GRU or a cell) with fixed float64 parameters (its state_dict,
written out under PyTorch's names), an input, optionally an initial state, and fixed random
cotangents for every output. Recorded: the outputs, and the gradients of
    L = sum(output * R) + sum(h_n * R_h) [+ sum(c_n * R_c)]
for the input, the initial state and every parameter. `lua` is the Lua constructor of the same
module; `call` says how the Lua test passes the state ("none", "h", "hc": a table {h, c}).
"""
import torch
import torch.nn as nn

from lua_literal import lua_string, lua_value

torch.manual_seed(0)
DT = torch.float64


def tensor_entry(t):
    return "{shape = {%s}, values = %s}" % (", ".join(str(n) for n in t.shape), lua_value(t.reshape(-1)))


def fill_parameters(module):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, dtype=DT) * 0.4)


def leaf(shape):
    return torch.randn(shape, dtype=DT).requires_grad_()


def case(name, lua, module, x, state):
    """state: None, a tensor h, or a tuple (h, c). Returns the case as Lua text."""
    module = module.to(DT)
    fill_parameters(module)
    out = module(x) if state is None else module(x, state)
    if isinstance(module, (nn.RNNCell, nn.GRUCell)):
        outputs = [out]
    elif isinstance(module, nn.LSTMCell):
        outputs = list(out)                 # h', c'
    elif isinstance(module, nn.LSTM):
        outputs = [out[0], out[1][0], out[1][1]]   # output, h_n, c_n
    else:
        outputs = [out[0], out[1]]          # output, h_n
    Rs = [torch.randn(o.shape, dtype=DT) for o in outputs]
    loss = sum((o * r).sum() for o, r in zip(outputs, Rs))
    loss.backward()
    states = [] if state is None else ([state] if torch.is_tensor(state) else list(state))
    call = "none" if state is None else ("h" if torch.is_tensor(state) else "hc")
    lines = ["  {name = %s, lua = %s, call = %s," % (lua_string(name), lua_string(lua), lua_string(call)),
             "   input = %s," % tensor_entry(x),
             "   input_grad = %s," % tensor_entry(x.grad)]
    lines.append("   state = {%s}," % ", ".join(tensor_entry(s) for s in states))
    lines.append("   state_grads = {%s}," % ", ".join(tensor_entry(s.grad) for s in states))
    lines.append("   outputs = {%s}," % ", ".join(tensor_entry(o) for o in outputs))
    lines.append("   R = {%s}," % ", ".join(tensor_entry(r) for r in Rs))
    lines.append("   params = {%s}," % ", ".join("[%s] = %s" % (lua_string(k), tensor_entry(p)) for k, p in module.named_parameters()))
    lines.append("   param_names = {%s}," % ", ".join(lua_string(k) for k, _ in module.named_parameters()))
    lines.append("   grads = {%s}}," % ", ".join("[%s] = %s" % (lua_string(k), tensor_entry(p.grad)) for k, p in module.named_parameters()))
    return "\n".join(lines)


def main():
    T, B, C, H = 4, 3, 5, 4
    cases = []
    for kind in ["RNN", "LSTM", "GRU"]:
        cls = getattr(nn, kind)
        lstm = kind == "LSTM"

        def state(L, batch=B):
            shape = (L, batch, H) if batch else (L, H)
            return (leaf(shape), leaf(shape)) if lstm else leaf(shape)

        cases.append(case(kind + " 1 layer", "nn.%s(%d, %d)" % (kind, C, H), cls(C, H), leaf((T, B, C)), None))
        cases.append(case(kind + " 1 layer, h0", "nn.%s(%d, %d)" % (kind, C, H), cls(C, H), leaf((T, B, C)), state(1)))
        cases.append(case(kind + " 2 layers, batch_first, h0",
                          "nn.%s(%d, %d, {num_layers = 2, batch_first = true})" % (kind, C, H),
                          cls(C, H, num_layers=2, batch_first=True), leaf((B, T, C)), state(2)))
        cases.append(case(kind + " 2 layers, batch_first",
                          "nn.%s(%d, %d, {num_layers = 2, batch_first = true})" % (kind, C, H),
                          cls(C, H, num_layers=2, batch_first=True), leaf((B, T, C)), None))
        cases.append(case(kind + " 2 layers, h0", "nn.%s(%d, %d, {num_layers = 2})" % (kind, C, H),
                          cls(C, H, num_layers=2), leaf((T, B, C)), state(2)))
        cases.append(case(kind + " 2 layers, no bias, unbatched, h0",
                          "nn.%s(%d, %d, {num_layers = 2, bias = false})" % (kind, C, H),
                          cls(C, H, num_layers=2, bias=False), leaf((T, C)), state(2, batch=None)))
        cell = getattr(nn, kind + "Cell")
        cell_state = (leaf((B, H)), leaf((B, H))) if lstm else leaf((B, H))
        cases.append(case(kind + "Cell", "nn.%sCell(%d, %d)" % (kind, C, H), cell(C, H), leaf((B, C)), None))
        cases.append(case(kind + "Cell, state", "nn.%sCell(%d, %d)" % (kind, C, H), cell(C, H), leaf((B, C)), cell_state))
        unbatched = (leaf((H,)), leaf((H,))) if lstm else leaf((H,))
        cases.append(case(kind + "Cell, no bias, unbatched", "nn.%sCell(%d, %d, {bias = false})" % (kind, C, H),
                          cell(C, H, bias=False), leaf((C,)), unbatched))
    cases.append(case("RNN relu, 2 layers", 'nn.RNN(%d, %d, {num_layers = 2, nonlinearity = "relu"})' % (C, H),
                      nn.RNN(C, H, num_layers=2, nonlinearity="relu"), leaf((T, B, C)), leaf((2, B, H))))
    cases.append(case("RNNCell relu", 'nn.RNNCell(%d, %d, {nonlinearity = "relu"})' % (C, H),
                      nn.RNNCell(C, H, nonlinearity="relu"), leaf((B, C)), leaf((B, H))))
    reprs = [
        ("nn.LSTM(10, 20, {num_layers = 2, batch_first = true, dropout = 0.5})",
         nn.LSTM(10, 20, num_layers=2, batch_first=True, dropout=0.5)),
        ('nn.RNN(3, 4, {nonlinearity = "relu", bias = false})', nn.RNN(3, 4, nonlinearity="relu", bias=False)),
        ("nn.GRU(3, 4)", nn.GRU(3, 4)),
        ("nn.LSTMCell(3, 4)", nn.LSTMCell(3, 4)),
        ('nn.RNNCell(3, 4, {bias = false, nonlinearity = "relu"})', nn.RNNCell(3, 4, bias=False, nonlinearity="relu")),
        ("nn.GRUCell(3, 4, {bias = false})", nn.GRUCell(3, 4, bias=False)),
    ]
    print("-- Made by tests/oracle/make_rnn_oracle.py with PyTorch %s; do not edit." % torch.__version__)
    print("return {")
    print("cases = {")
    print("\n".join(cases))
    print("},")
    print("reprs = {")
    for lua, module in reprs:
        print("  {lua = %s, text = %s}," % (lua_string(lua), lua_string(repr(module))))
    print("},")
    print("}")


if __name__ == "__main__":
    main()
