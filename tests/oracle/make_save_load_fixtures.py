"""make_save_load_fixtures.py: the files tests/lua/test_save_load.lua loads with torch.load, made
the way a Python user makes them (numpy.savez, numpy.savez_compressed, and a safetensors file).

    /usr/bin/python3 tests/oracle/make_save_load_fixtures.py tests/oracle/save_load

The safetensors file is written with struct + json (the format: an 8-byte little-endian header
length, a JSON header, the raw bytes), so that the `safetensors` package is not needed; when it is
installed, the file is also checked against safetensors.numpy.load_file.

Values (the Lua test builds the same ones):
    fc.weight            float32 [2, 3]   arange(6) / 4
    fc.bias              float64 [2]      [-1.5, 2.25]
    0.weight             int64 [2, 2]     [[1, -2], [3, 4]]
    num_batches_tracked  int64 0-d        7
    big_endian           >f8 [2]          [1, 2]        (loads as float64)
    empty                float32 [0, 3]
    note                 str              "héllo"       (a 0-d '<U5' array; safetensors: __metadata__)
    tag                  bytes            b"raw"        (a 0-d '|S3' array; .npz only)
"""
import json
import struct
import sys

import numpy as np

# The safetensors writer (make_state_dict_fixtures.py imports it).
SAFETENSORS_DTYPES = {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("int64"): "I64"}
def write_safetensors(path, tensors, metadata):
    header, data = {"__metadata__": metadata}, b""
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": SAFETENSORS_DTYPES[array.dtype], "shape": list(array.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)



def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."

    arrays = {
        "fc.weight": (np.arange(6, dtype=np.float32) / 4).reshape(2, 3),
        "fc.bias": np.array([-1.5, 2.25], dtype=np.float64),
        "0.weight": np.array([[1, -2], [3, 4]], dtype=np.int64),
        "num_batches_tracked": np.array(7, dtype=np.int64),
        "big_endian": np.array([1.0, 2.0], dtype=">f8"),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    strings = {"note": np.array("h\u00e9llo"), "tag": np.array(b"raw")}

    np.savez(f"{out}/numpy_savez.npz", **arrays, **strings)
    np.savez_compressed(f"{out}/numpy_savez_compressed.npz", **arrays, **strings)
    # An array of Python objects is stored as a pickle: torch.load must refuse it without running it.
    np.savez(f"{out}/numpy_object_array.npz", obj=np.array([{"a": 1}, None], dtype=object))

    # safetensors: little-endian tensors only (no big_endian entry), strings in __metadata__.
    tensors = {k: v for k, v in arrays.items() if k != "big_endian"}
    write_safetensors(f"{out}/python.safetensors", tensors, {"format": "pt", "note": "h\u00e9llo"})
    # A dtype tapedeck does not hold: torch.load must name it.
    SAFETENSORS_DTYPES[np.dtype("float16")] = "F16"
    write_safetensors(f"{out}/python_f16.safetensors", {"half": np.array([1.0, 2.0], dtype=np.float16)}, {})

    try:
        from safetensors.numpy import load_file
        loaded = load_file(f"{out}/python.safetensors")
        assert all(np.array_equal(loaded[k], v) for k, v in tensors.items())
    except ImportError:
        pass
    print("wrote", out)


if __name__ == "__main__":
    main()
