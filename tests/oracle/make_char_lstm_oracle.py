"""make_char_lstm_oracle.py: PyTorch's numbers for tests/lua/test_char_lstm_oracle.lua — the model
of scripts/models/char_lstm_model.lua at a tiny size, two training steps.

    /usr/bin/python3 tests/oracle/make_char_lstm_oracle.py tests/oracle/char_lstm

The model (the same as the Lua one, names as its state_dict's):
    embed = Embedding(V, E); lstm = LSTM(E, H, num_layers=2, batch_first=True); head = Linear(H, V)
    loss  = cross_entropy(head(lstm(embed(x))[0]).reshape(-1, V), y.reshape(-1))
A training step: zero_grad, loss.backward(), clip_grad_norm_(parameters, MAX_NORM) (which does
clip here: the gradients' norm is larger), Adam(lr=LR).step().

Writes
    weights.npz    the initial float32 state_dict (numpy.savez, PyTorch's keys)
    expected.npz   the batches x1, y1, x2, y2 ([B, T] int64, **1-based** as the Lua model takes
                   them), and for each dtype d in float32, float64 (the float64 run starts from the
                   same float32 weights) and step s in 1, 2:
                   "d.s.loss", "d.s.norm" (clip_grad_norm_'s total), "d.s.grad.<name>" (the clipped
                   gradients), "d.s.param.<name>" (the weights after Adam's step)
"""
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

V, E, H, LAYERS = 11, 5, 8, 2   # vocabulary, embedding, hidden size, LSTM layers
B, T = 3, 6                     # batch, sequence length
LR, MAX_NORM = 0.01, 0.1


class CharLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, E)
        self.lstm = nn.LSTM(E, H, num_layers=LAYERS, batch_first=True)
        self.head = nn.Linear(H, V)

    def forward(self, x):
        out, _ = self.lstm(self.embed(x))
        return self.head(out)


def train(weights, dtype, batches, out):
    model = CharLSTM().to(dtype)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    name = "float32" if dtype == torch.float32 else "float64"
    for step, (x, y) in enumerate(batches, start=1):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
        assert norm > MAX_NORM, "the test is meant to clip (norm %g)" % norm
        optimizer.step()
        prefix = "%s.%d." % (name, step)
        out[prefix + "loss"] = np.array(loss.item(), dtype=np.float64)
        out[prefix + "norm"] = np.array(norm.item(), dtype=np.float64)
        for key, p in model.named_parameters():
            out[prefix + "grad." + key] = p.grad.detach().numpy().copy()
            out[prefix + "param." + key] = p.detach().numpy().copy()


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.manual_seed(0)
    model = CharLSTM()
    weights = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    np.savez(folder + "/weights.npz", **weights)
    batches = [(torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))) for _ in range(2)]
    out = {}
    for i, (x, y) in enumerate(batches, start=1):
        out["x%d" % i] = (x + 1).numpy()
        out["y%d" % i] = (y + 1).numpy()
    for dtype in (torch.float32, torch.float64):
        train(weights, dtype, batches, out)
    np.savez(folder + "/expected.npz", **out)
    print("wrote", folder, "losses", out["float32.1.loss"], out["float32.2.loss"], "norms", out["float32.1.norm"],
          out["float32.2.norm"])


if __name__ == "__main__":
    main()
