#!/usr/bin/env python3
"""check_onnx_cases.py DIR: checks the ONNX models that export_cases.lua (or the op test) wrote.

    python3 check_onnx_cases.py DIR [--tolerance 1e-5]

For each NAME.onnx in DIR (and NAME.inline.onnx): onnx.checker (full check), strict shape
inference, then ONNX Runtime on NAME.inputs.npz; every output must match NAME.expected.npz, shapes
and dtypes equal, values within the tolerance (float32: 1e-5) relative to the largest magnitude
of its kind in the step: the returned tensors, the gradients (.grad), the updated tensors (.new).
Per kind, not per tensor: a gradient that is rounding noise (a convolution's bias before batch
norm gets ~1e-8 where the step's gradients are ~0.1) is compared at the step's scale. Prints one line per model and exits 1 when any fails. Exits 77 (CTest: skipped)
when onnx or onnxruntime is not installed, unless CI=true (CI installs them: .ci/run).
"""
import glob
import os
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
except ImportError as missing:
    print(f"skipped: {missing} (pip install onnx onnxruntime)")
    sys.exit(1 if os.environ.get("CI") == "true" else 77)


def kind_of(name):
    """The kind of an output: "grad", "new" or "output"."""
    for kind in ("grad", "new"):
        if name.endswith("." + kind):
            return kind
    return "output"


def check_model(path, inputs, expected, tolerance):
    """Returns a list of problems (empty: the model is right)."""
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    options = ort.SessionOptions()
    options.log_severity_level = 3   # errors only: unused initializers are not ours to warn about
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    feeds = {i.name: inputs[i.name] for i in session.get_inputs() if i.name in inputs}
    names = [o.name for o in session.get_outputs()]
    problems = []
    scale = {}
    for name, want in expected.items():
        finite = want[np.isfinite(want)] if want.dtype.kind == "f" else want
        if finite.size:
            scale[kind_of(name)] = max(scale.get(kind_of(name), 1e-30), float(np.max(np.abs(finite))))
    for name, got in zip(names, session.run(names, feeds)):
        if name not in expected:
            problems.append(f"{name}: not in the expected results")
            continue
        want = expected[name]
        if got.shape != want.shape or got.dtype != want.dtype:
            problems.append(f"{name}: {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}")
            continue
        if want.size == 0:
            continue
        nan = np.isnan(want) if want.dtype.kind == "f" else np.zeros(want.shape, bool)
        if np.any(nan != (np.isnan(got) if got.dtype.kind == "f" else False)):
            problems.append(f"{name}: NaN at other places")
            continue
        if np.all(nan):
            continue
        largest = scale[kind_of(name)]
        worst = float(np.max(np.abs(got[~nan].astype(np.float64) - want[~nan].astype(np.float64))))
        if not worst <= tolerance * largest:
            problems.append(f"{name}: differs by {worst:.3g} (largest {kind_of(name)} {largest:.3g}, "
                            f"tolerance {tolerance:g} relative)")
    missing = set(expected) - set(names)
    if missing:
        problems.append(f"outputs missing: {sorted(missing)}")
    return problems


def main():
    args = sys.argv[1:]
    tolerance = 1e-5
    if "--tolerance" in args:
        at = args.index("--tolerance")
        tolerance = float(args[at + 1])
        del args[at:at + 2]
    if len(args) != 1:
        print(__doc__)
        return 2
    directory = args[0]
    models = sorted(glob.glob(os.path.join(directory, "*.onnx")))
    if not models:
        print(f"no .onnx files in {directory}")
        return 1
    failed = skipped = 0
    for path in models:
        name = os.path.basename(path)[:-len(".onnx")]
        case = name[:-len(".inline")] if name.endswith(".inline") else name
        inputs = dict(np.load(os.path.join(directory, case + ".inputs.npz")))
        expected = dict(np.load(os.path.join(directory, case + ".expected.npz")))
        try:
            problems = check_model(path, inputs, expected, tolerance)
        except Exception as error:   # the checker, shape inference or ONNX Runtime refused it
            if "NOT_IMPLEMENTED" in str(error) and any(a.dtype == np.float64 for a in inputs.values()):
                # ONNX Runtime's CPU kernels lack float64 for Conv, ConvTranspose, Erf, Softplus:
                # the model passed the checker; it is not run (docs/onnx.md)
                print(f"skip {name}: ONNX Runtime has no float64 kernel: {str(error).split(' : ')[-1][:80]}")
                skipped += 1
                continue
            problems = [f"{type(error).__name__}: {error}"]
        print(f"{'ok  ' if not problems else 'FAIL'} {name}")
        for p in problems:
            print(f"       {p}")
        failed += bool(problems)
    print(f"{len(models) - failed - skipped} of {len(models)} models match, {skipped} not run (no float64 kernel in "
          f"ONNX Runtime), {failed} fail (onnx {onnx.__version__}, onnxruntime {ort.__version__})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
