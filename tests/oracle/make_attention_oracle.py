"""make_attention_oracle.py: PyTorch's numbers for tests/lua/test_attention_oracle.lua.

Run: /usr/bin/python3 tests/oracle/make_attention_oracle.py > tests/oracle/attention_oracle_data.lua

Each case: an nn.MultiheadAttention with fixed float64 weights (its state_dict, written out), the
inputs (self-attention passes one tensor as query, key and value; "kv" one tensor as key and
value), the masks and forward options, fixed random cotangents R (for the output) and RW (for the
attention weights); PyTorch's output and weights, and the gradients of
sum(output * R) + sum(weights * RW) for the parameters and the inputs.

Masks: PyTorch's bool masks are written as int64 0/1 (the boolean kind in Lua: there is no bool
dtype), float masks as they are. PyTorch 1.13's forward has no is_causal: a case with
`is_causal = true` passes the causal bool mask to PyTorch and only the flag to Lua (PyTorch 2.x's
is_causal is a hint that needs the mask too; docs/lua_api.md says so).
"""
import torch
import torch.nn as nn

from lua_literal import lua_string, lua_value

torch.manual_seed(0)
DT = torch.float64


def tensor_entry(t):
    dtype = {torch.float64: "float64", torch.int64: "int64", torch.bool: "int64"}[t.dtype]
    t = t.long() if t.dtype == torch.bool else t
    return "{dtype = %s, shape = {%s}, values = %s}" % (
        lua_string(dtype), ", ".join(str(n) for n in t.shape), lua_value(t.reshape(-1)))


def r(*shape):
    return torch.randn(*shape, dtype=DT)


def case(name, lua, module, inputs, layout="separate", key_padding_mask=None, attn_mask=None, causal=False,
         need_weights=True, average_attn_weights=True):
    """layout: "self" (one tensor for q, k, v), "kv" (one for k and v) or "separate"."""
    module = module.to(DT)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, dtype=DT) * 0.5)
    state = {k: v.clone() for k, v in module.state_dict().items()}
    leaves = [t.clone().requires_grad_(True) for t in inputs]
    if layout == "self":
        q = k = v = leaves[0]
    elif layout == "kv":
        q, k = leaves
        v = k
    else:
        q, k, v = leaves
    torch_mask = attn_mask
    if causal:
        L = q.shape[1] if (module.batch_first and q.dim() == 3) else q.shape[0]
        S = k.shape[1] if (module.batch_first and k.dim() == 3) else k.shape[0]
        torch_mask = torch.ones(L, S, dtype=torch.bool).triu(1)
    out, weights = module(q, k, v, key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=torch_mask,
                          average_attn_weights=average_attn_weights)
    R = r(*out.shape)
    loss = (out * R).sum()
    RW = None
    if weights is not None:
        RW = r(*weights.shape)
        loss = loss + (weights * RW).sum()
    loss.backward()
    opts = ["need_weights = %s" % lua_value(need_weights), "average_attn_weights = %s" % lua_value(average_attn_weights)]
    if causal:
        opts.append("is_causal = true")
    lines = ["  {name = %s, lua = %s, layout = %s, options = {%s}," % (lua_string(name), lua_string(lua), lua_string(layout),
                                                                    ", ".join(opts))]
    lines.append("   inputs = {%s}," % ", ".join(tensor_entry(t) for t in leaves))
    if key_padding_mask is not None:
        lines.append("   key_padding_mask = %s," % tensor_entry(key_padding_mask))
    if attn_mask is not None:
        lines.append("   attn_mask = %s," % tensor_entry(attn_mask))
    lines.append("   state = {%s}," % ", ".join("[%s] = %s" % (lua_string(k), tensor_entry(v)) for k, v in state.items()))
    lines.append("   R = %s," % tensor_entry(R))
    if RW is not None:
        lines.append("   RW = %s," % tensor_entry(RW))
        lines.append("   weights = %s," % tensor_entry(weights))
    lines.append("   output = %s," % tensor_entry(out))
    grads = {n: p.grad for n, p in module.named_parameters()}
    lines.append("   grads = {%s}," % ", ".join("[%s] = %s" % (lua_string(k), tensor_entry(v)) for k, v in grads.items()))
    lines.append("   input_grads = {%s}}," % ", ".join(tensor_entry(t.grad) for t in leaves))
    return "\n".join(lines)


def cases():
    E, H = 6, 2
    out = []
    mha = lambda **kw: nn.MultiheadAttention(E, H, **kw)
    # self-attention, sequence-first [L, N, E] and batch-first [N, L, E]
    out.append(case("self seq-first", "nn.MultiheadAttention(6, 2)", mha(), [r(5, 3, E)], "self"))
    out.append(case("self batch-first", "nn.MultiheadAttention(6, 2, {batch_first = true})", mha(batch_first=True),
                    [r(3, 5, E)], "self"))
    # causal: is_causal in Lua, the bool triu mask in PyTorch
    out.append(case("self causal batch-first", "nn.MultiheadAttention(6, 2, {batch_first = true})", mha(batch_first=True),
                    [r(2, 5, E)], "self", causal=True))
    out.append(case("self bool attn_mask", "nn.MultiheadAttention(6, 2)", mha(), [r(4, 2, E)], "self",
                    attn_mask=torch.ones(4, 4, dtype=torch.bool).triu(1)))
    float_mask = r(4, 4)
    float_mask[0, 3] = float("-inf")
    out.append(case("self float attn_mask", "nn.MultiheadAttention(6, 2)", mha(), [r(4, 2, E)], "self",
                    attn_mask=float_mask))
    out.append(case("self 3-D float attn_mask", "nn.MultiheadAttention(6, 2, {batch_first = true})", mha(batch_first=True),
                    [r(3, 4, E)], "self", attn_mask=r(3 * H, 4, 4)))
    # cross-attention: key and value one tensor of another length; then three tensors
    kpm = torch.tensor([[False, False, True, False, True, False], [False, False, False, False, False, True]])
    out.append(case("cross key_padding_mask", "nn.MultiheadAttention(6, 2)", mha(), [r(4, 2, E), r(6, 2, E)], "kv",
                    key_padding_mask=kpm))
    out.append(case("cross batch-first masks", "nn.MultiheadAttention(6, 2, {batch_first = true})", mha(batch_first=True),
                    [r(2, 4, E), r(2, 6, E)], "kv", key_padding_mask=kpm, attn_mask=r(4, 6)))
    out.append(case("cross separate q k v", "nn.MultiheadAttention(6, 2)", mha(), [r(3, 2, E), r(5, 2, E), r(5, 2, E)]))
    out.append(case("cross float key_padding_mask", "nn.MultiheadAttention(6, 2)", mha(), [r(3, 2, E), r(5, 2, E)], "kv",
                    key_padding_mask=r(2, 5)))
    # kdim / vdim: separate projection weights
    out.append(case("kdim vdim", "nn.MultiheadAttention(6, 3, {kdim = 4, vdim = 5})", nn.MultiheadAttention(E, 3, kdim=4, vdim=5),
                    [r(3, 2, E), r(4, 2, 4), r(4, 2, 5)]))
    out.append(case("kdim vdim batch-first no bias", "nn.MultiheadAttention(6, 3, {kdim = 4, vdim = 5, bias = false, batch_first = true})",
                    nn.MultiheadAttention(E, 3, kdim=4, vdim=5, bias=False, batch_first=True),
                    [r(2, 3, E), r(2, 4, 4), r(2, 4, 5)], key_padding_mask=torch.tensor([[False, True, False, False],
                                                                                         [False, False, False, True]])))
    # the weights options
    out.append(case("per-head weights", "nn.MultiheadAttention(6, 2)", mha(), [r(4, 2, E)], "self",
                    average_attn_weights=False))
    out.append(case("no weights", "nn.MultiheadAttention(6, 2, {batch_first = true})", mha(batch_first=True), [r(2, 4, E)],
                    "self", need_weights=False, attn_mask=torch.ones(4, 4, dtype=torch.bool).triu(1)))
    # unbatched: [L, E]
    out.append(case("unbatched self causal", "nn.MultiheadAttention(6, 2)", mha(), [r(5, E)], "self", causal=True))
    out.append(case("unbatched cross masks", "nn.MultiheadAttention(6, 2, {batch_first = true})", mha(batch_first=True),
                    [r(3, E), r(4, E)], "kv", key_padding_mask=torch.tensor([False, True, False, False]),
                    attn_mask=r(H, 3, 4), average_attn_weights=False))
    out.append(case("no bias", "nn.MultiheadAttention(6, 2, {bias = false})", nn.MultiheadAttention(E, H, bias=False),
                    [r(4, 2, E)], "self"))
    return out


def init_stats():
    """PyTorch's init, as statistics a Lua test can check (its random numbers differ): the xavier
    bound of in_proj_weight, and which tensors start at zero."""
    m = nn.MultiheadAttention(64, 4)
    bound = (6 / (64 + 3 * 64)) ** 0.5
    return "{in_proj_bound = %s, in_proj_max = %s, out_proj_bound = %s, zeros = {\"in_proj_bias\", \"out_proj.bias\"}}" % (
        lua_value(bound), lua_value(m.in_proj_weight.abs().max()), lua_value(1 / 64 ** 0.5))


def main():
    print("-- Generated by tests/oracle/make_attention_oracle.py (PyTorch %s); do not edit." % torch.__version__)
    print("return {cases = {")
    print("\n".join(cases()))
    print("}, init = %s," % init_stats())
    print("repr = %s}" % lua_string(repr(nn.MultiheadAttention(6, 2))))


if __name__ == "__main__":
    main()
