"""make_tiny_gpt_oracle.py: PyTorch's numbers for tests/lua/test_tiny_gpt_oracle.lua.

Run: /usr/bin/python3 tests/oracle/make_tiny_gpt_oracle.py   (writes tests/oracle/tiny_gpt/*.npz)

A PyTorch twin of scripts/models/tiny_gpt_model.lua (nanoGPT's model.py, the same module names),
at a tiny fixed size (CONFIG), initialised as nanoGPT does from a fixed seed. Writes
- tiny_gpt/weights.npz: its float32 state_dict, as a PyTorch user exports one
  (numpy.savez(**{k: v.numpy()})), lm_head.weight and transformer.wte.weight both (tied);
- tiny_gpt/expected.npz: a fixed batch (idx, targets: 0-based token ids, [B, T] with T <
  block_size) and, for float32 and float64 (the float32 weights converted), one training step:
  zero_grad, forward, cross_entropy loss, backward, AdamW step (nanoGPT's configure_optimizers:
  weight decay on the matrices only), as `<dtype>.loss`, `<dtype>.logits`, `<dtype>.grad.<name>`
  and `<dtype>.after.<name>` (the parameters after the step).
"""
import math
import os

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

CONFIG = dict(block_size=8, vocab_size=11, n_layer=2, n_head=2, n_embd=8, dropout=0.0, bias=True)
BATCH, T = 3, 6
LR, BETAS, WEIGHT_DECAY = 1e-2, (0.9, 0.95), 0.1
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_gpt")


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"], bias=c["bias"])
        self.c_proj = nn.Linear(c["n_embd"], c["n_embd"], bias=c["bias"])
        self.attn_dropout = nn.Dropout(c["dropout"])
        self.resid_dropout = nn.Dropout(c["dropout"])
        self.n_head, self.n_embd = c["n_head"], c["n_embd"]
        size = c["block_size"]
        self.register_buffer("causal_mask", torch.ones(size, size).triu(1).view(1, 1, size, size), persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.causal_mask[:, :, :T, :T] != 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"], bias=c["bias"])
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"], bias=c["bias"])
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c["n_embd"])
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c["n_embd"])
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c["vocab_size"], c["n_embd"]),
            wpe=nn.Embedding(c["block_size"], c["n_embd"]),
            drop=nn.Dropout(c["dropout"]),
            h=nn.ModuleList([Block(c) for _ in range(c["n_layer"])]),
            ln_f=nn.LayerNorm(c["n_embd"]),
        ))
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * c["n_layer"]))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        params = [p for p in self.parameters()]
        decay = [p for p in params if p.dim() >= 2]
        no_decay = [p for p in params if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)


def one_step(model, idx, targets, prefix, out):
    """One training step as the Lua test runs it; its numbers into out under prefix."""
    optimizer = model.configure_optimizers(WEIGHT_DECAY, LR, BETAS)
    optimizer.zero_grad(set_to_none=True)
    logits, loss = model(idx, targets)
    loss.backward()
    optimizer.step()
    out[prefix + ".loss"] = loss.detach().numpy()
    out[prefix + ".logits"] = logits.detach().numpy()
    for name, p in model.named_parameters():
        out[prefix + ".grad." + name] = p.grad.numpy()
        out[prefix + ".after." + name] = p.detach().numpy()


def main():
    torch.manual_seed(1337)
    model = GPT(CONFIG)
    # larger weights than nanoGPT's 0.02 init so every path (attention, GELU) does real work
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape) * 0.3)
    weights = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    os.makedirs(HERE, exist_ok=True)
    np.savez(os.path.join(HERE, "weights.npz"), **weights)

    idx = torch.randint(0, CONFIG["vocab_size"], (BATCH, T))
    targets = torch.randint(0, CONFIG["vocab_size"], (BATCH, T))
    expected = {"idx": idx.numpy(), "targets": targets.numpy()}
    for dtype, name in ((torch.float32, "float32"), (torch.float64, "float64")):
        twin = GPT(CONFIG)
        twin.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
        one_step(twin.to(dtype), idx, targets, name, expected)
    np.savez(os.path.join(HERE, "expected.npz"), **expected)
    print("wrote %s/weights.npz (%d tensors) and expected.npz (%d arrays)" % (HERE, len(weights), len(expected)))


if __name__ == "__main__":
    main()
