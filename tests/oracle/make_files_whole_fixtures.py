"""make_files_whole_fixtures.py: files made by NumPy and PyTorch that tests/lua/test_files_whole.lua
loads with torch.load and torch.load_npy.

    /work/torchenv/bin/python tests/oracle/make_files_whole_fixtures.py tests/oracle/files_whole

    fortran_2d.npy          float32 [2, 3]     a transposed PyTorch tensor, torch.arange(6.).reshape(3, 2).T,
                                               as numpy.save writes it: fortran_order True
    fortran_3d_f64.npy      float64 [2, 3, 4]  numpy.asfortranarray(arange(24).reshape(2, 3, 4))
    fortran_i64.npy         int64 [3, 2]       numpy.arange(6).reshape(2, 3).T
    fortran.npz             numpy.savez of the three above (keys a, b, c)
    torch_checkpoint.safetensors
                            a PyTorch state_dict of nn.Linear(3, 2) (seed 0) as
                            safetensors.torch.save_file(sd, path, metadata={"format": "pt"}) writes it
                            (written by hand, struct + json: the safetensors package is not needed);
                            its values beside it in torch_checkpoint.lua
"""
import json
import struct
import sys

import numpy as np
import torch


def write_safetensors(path, tensors, metadata):
    dtypes = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}
    header, data = {"__metadata__": metadata}, b""
    for name, t in tensors.items():
        raw = t.detach().contiguous().numpy().tobytes()
        header[name] = {"dtype": dtypes[t.dtype], "shape": list(t.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def lua_table(values):
    return "{" + ", ".join(repr(float(v)) for v in values) + "}"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    a = torch.arange(6.0).reshape(3, 2).T.numpy()
    b = np.asfortranarray(np.arange(24, dtype=np.float64).reshape(2, 3, 4))
    c = np.arange(6, dtype=np.int64).reshape(2, 3).T
    for array in (a, b, c):
        assert array.flags.f_contiguous and not array.flags.c_contiguous
    np.save(f"{out}/fortran_2d.npy", a)
    np.save(f"{out}/fortran_3d_f64.npy", b)
    np.save(f"{out}/fortran_i64.npy", c)
    np.savez(f"{out}/fortran.npz", a=a, b=b, c=c)
    for name in ("fortran_2d", "fortran_3d_f64", "fortran_i64"):
        with open(f"{out}/{name}.npy", "rb") as f:
            assert b"'fortran_order': True" in f.read(128), name

    torch.manual_seed(0)
    sd = torch.nn.Linear(3, 2).state_dict()
    write_safetensors(f"{out}/torch_checkpoint.safetensors", sd, {"format": "pt"})
    with open(f"{out}/torch_checkpoint.lua", "w") as f:
        f.write("-- made by make_files_whole_fixtures.py: the values in torch_checkpoint.safetensors (row-major)\n")
        f.write("return {\n")
        for name, t in sd.items():
            f.write(f'  ["{name}"] = {{shape = {{{", ".join(map(str, t.shape))}}}, values = {lua_table(t.flatten().tolist())}}},\n')
        f.write("}\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
