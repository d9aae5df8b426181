"""make_state_dict_fixtures.py: a PyTorch model's weights exported the two ways a PyTorch user
exports them, for tests/lua/test_state_dict_files.lua to load into the same architecture.

    /usr/bin/python3 tests/oracle/make_state_dict_fixtures.py tests/oracle/state_dict

The model: Sequential(Linear(3, 4), BatchNorm1d(4), ReLU(), Linear(4, 2)) in float32, seeded, with
one training-mode forward so that BatchNorm's running stats are not their initial values. Writes
    pytorch_mlp.npz            numpy.savez(**{k: v.numpy() for k, v in model.state_dict().items()})
    pytorch_mlp.safetensors    the same tensors, metadata {"format": "pt"} as PyTorch's tools write
    pytorch_mlp_expected.lua   an input x and the model's eval-mode output y = model(x)
"""
import sys

import numpy as np
import torch

from make_save_load_fixtures import write_safetensors


def lua_table(values):
    return "{" + ", ".join(lua_table(v) if isinstance(v, list) else repr(float(v)) for v in values) + "}"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(),
                                torch.nn.Linear(4, 2))
    model.train()
    model(torch.randn(5, 3))   # moves running_mean, running_var, num_batches_tracked
    model.eval()
    x = torch.randn(2, 3)
    with torch.no_grad():
        y = model(x)
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    np.savez(f"{out}/pytorch_mlp.npz", **state)
    write_safetensors(f"{out}/pytorch_mlp.safetensors", state, {"format": "pt"})
    with open(f"{out}/pytorch_mlp_expected.lua", "w") as f:
        f.write("-- made by tests/oracle/make_state_dict_fixtures.py (PyTorch %s)\n" % torch.__version__)
        f.write("return {keys = {%s},\n" % ", ".join('"%s"' % k for k in state))
        f.write("        x = %s,\n" % lua_table(x.tolist()))
        f.write("        y = %s}\n" % lua_table(y.tolist()))
    print("wrote", out)


if __name__ == "__main__":
    main()
