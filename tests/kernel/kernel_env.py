"""kernel_env.py: what every kernel test needs: the kernelspec of the tapedeck under test installed
into a temporary prefix (JUPYTER_PATH points there), and exit 77 (ctest: skipped) when this Python
lacks jupyter_client or the tapedeck was built without the kernel. Under the sanitizer build
(ASAN_OPTIONS set), the kernel's reports go to files that finish() turns into a failure: the
kernel is Jupyter's child, so its exit status reaches no test."""
import atexit
import glob
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


def install_kernelspec(tapedeck):
    """Install tapedeck's kernelspec where this process's Jupyter looks, and return the prefix."""
    try:
        import jupyter_client  # noqa: F401
    except ImportError:
        skip("no jupyter_client in " + sys.executable + " (Debian: python3-jupyter-client)")
    probe = subprocess.run([tapedeck, "--kernel", "/nonexistent.json"], capture_output=True, text=True)
    if "has no Jupyter kernel" in probe.stderr:
        skip("this tapedeck was built without the Jupyter kernel (xeus-dev not found)")
    prefix = tempfile.mkdtemp(prefix="tapedeck-kernel-test-")
    atexit.register(shutil.rmtree, prefix, True)
    subprocess.run([tapedeck, "--install-kernel", "--prefix", prefix], check=True, capture_output=True)
    os.environ["JUPYTER_PATH"] = os.path.join(prefix, "share", "jupyter")
    os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(prefix, "runtime")
    os.environ["XDG_CACHE_HOME"] = os.path.join(prefix, "cache")   # native plans: not the user's ~/.cache
    for variable in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
        if variable in os.environ:
            os.environ[variable] += ":log_path=" + os.path.join(prefix, "sanitizer")
    global _prefix
    _prefix = prefix
    return prefix


_prefix = None


def finish(failed):
    """Exit: 66 when a sanitizer reported on the kernel (the report printed), else 1 when `failed`,
    else 0. os._exit: jupyter_client's destructors log noise at interpreter exit."""
    reports = sorted(glob.glob(os.path.join(_prefix, "sanitizer*"))) if _prefix else []
    for report in reports:
        with open(report, errors="replace") as f:
            print("sanitizer report from the kernel (%s):\n%s" % (report, f.read()))
    sys.stdout.flush()
    os._exit(66 if reports else 1 if failed else 0)
