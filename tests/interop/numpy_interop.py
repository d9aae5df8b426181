"""numpy_interop.py DIR (run by numpy_interop.sh): reads what torch.save wrote with NumPy alone,
checks it against DIR/expected.json exactly, and writes it back (DIR/back.npz with numpy.savez,
DIR/back.safetensors with struct + json) for tapedeck to load."""
import json
import struct
import sys

import numpy as np

directory = sys.argv[1]
expected = json.load(open(f"{directory}/expected.json"))
NUMBERS = "__tapedeck_numbers__"
DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64}


def check(entries, numbers, what):
    """entries: key -> numpy array (strings as 0-d str arrays or str)."""
    assert set(entries) == set(expected), f"{what}: keys {sorted(entries)} != {sorted(expected)}"
    for key, want in expected.items():
        got = entries[key]
        if "string" in want:
            assert str(got) == want["string"], f"{what}: {key} = {got!r}"
        elif "number" in want:
            assert key in numbers and np.ndim(got) == 0, f"{what}: {key} is not listed as a number"
            assert got.dtype == (np.int64 if want["integer"] else np.float64), f"{what}: {key} dtype {got.dtype}"
            assert got.item() == want["number"], f"{what}: {key} = {got.item()}"
        else:
            assert str(got.dtype) == want["dtype"], f"{what}: {key} dtype {got.dtype}"
            assert list(got.shape) == want["shape"], f"{what}: {key} shape {got.shape}"
            assert got.reshape(-1).tolist() == want["values"], f"{what}: {key} values"


def read_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__", {})
    body = data[8 + n:]
    tensors = {}
    for key, info in header.items():
        begin, end = info["data_offsets"]
        tensors[key] = np.frombuffer(body[begin:end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
    return tensors, metadata


def write_safetensors(path, tensors, metadata):
    header, body = {"__metadata__": metadata}, b""
    names = {np.dtype(v): k for k, v in DTYPES.items()}
    for key, array in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        header[key] = {"dtype": names[array.dtype], "shape": list(array.shape), "data_offsets": [len(body), len(body) + len(raw)]}
        body += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + body)


def is_record(key):
    """tapedeck's own string entries: which keys are numbers, booleans, strings, how they nest."""
    return key.startswith("__tapedeck_")


for name in ["saved.npz", "saved_compressed.npz"]:
    with np.load(f"{directory}/{name}") as z:   # allow_pickle stays False: no pickles inside
        entries = {k: z[k] for k in z.files}
    records = {k: str(entries.pop(k)) for k in list(entries) if is_record(k)}
    assert "__tapedeck_nesting__" in records, f"{name}: the nesting is recorded"
    check(entries, json.loads(records[NUMBERS]), name)
# Back, unchanged, as numpy.savez writes it (the records are string entries like any other).
np.savez(f"{directory}/back.npz", **entries, **records)

tensors, metadata = read_safetensors(f"{directory}/saved.safetensors")
numbers = json.loads(metadata[NUMBERS])
check({**tensors, **{k: v for k, v in metadata.items() if not is_record(k)}}, numbers, "saved.safetensors")
write_safetensors(f"{directory}/back.safetensors", tensors, metadata)
print("numpy read tapedeck's files: ok")
