"""peer_serve.py: how bench_torch.py and bench_tf.py time their workloads, alone or for `tapedeck bench`.

A framework script describes itself with a Framework (below): its version lines, its modes and,
for a workload name and a list of modes, one Step or ColdStep per mode. This module times them.

    python3 bench_X.py [--device cuda] [--modes eager,script] SAMPLES [W1 W2 ...]   standalone
    python3 bench_X.py --serve [--device cuda]                                    a peer of tapedeck bench

Standalone, it prints the version lines ("torch 2.15.0", "blas mkl", ...), then one line per
workload and mode, "W2 eager <min µs> <median µs>" (µs per call), the modes' samples interleaved
within each workload; a mode that cannot run says why on stderr ("# W2 script: ...").

Served (tapedeck bench --peers, bench/peers.lua), it prints its version lines and "ready", then
answers one command per line of stdin, so that tapedeck interleaves its samples with its own:

    setup W2 eager script   -> one line per mode, "ok eager <calls per sample>" or
                               "fail script <why>", then "ready"
    sample W2 eager         -> "<µs per call>" (one sample), or "fail <why>"
    done W2                 -> "ready" (the workload's steps are dropped)

End of input ends it. Every time is taken here with time.perf_counter, around the calls only.
"""
import re
import statistics
import sys
import time


class Unsupported(Exception):
    """A workload that has no twin in this framework, or a mode that cannot run it."""


class Step:
    """A workload in one mode, steady state: call() runs one iteration. `warmup` calls run before
    anything is timed (a trace or compile happens there, so it is excluded); a sample is
    `calls` calls, or, when calls is None, as many as take about 20 ms."""

    def __init__(self, call, warmup=20, calls=None):
        self.call, self.warmup, self.calls = call, warmup, calls


class ColdStep:
    """The lecture slide's timeit(number=10) of a static function: a sample makes a new function
    with make() (a new tf.function, trace, compile or freeze) and times its first `calls` calls,
    the making and the first call's tracing included. One sample is run and dropped at setup, so
    what a process pays once (imports, first-use caches) is not counted."""

    def __init__(self, make, calls=10):
        self.make, self.calls = make, calls


class Framework:
    """What a framework script gives this module. Subclasses set `modes` (the default order) and
    define versions() -> list of lines and setup(name, modes) -> {mode: Step, ColdStep or the
    reason it cannot run (a str)}; sync() waits for queued device work (a GPU); drop(name) frees
    what setup made."""

    modes = ()

    def versions(self):
        return []

    def setup(self, name, modes):
        raise NotImplementedError

    def sync(self):
        pass

    def drop(self, name):
        pass


class Timer:
    """One mode of one workload, ready to sample: its warm-up ran and its calls per sample are known."""

    def __init__(self, step, sync):
        self.step, self.sync = step, sync
        if isinstance(step, ColdStep):
            self.calls = step.calls
            self.sample()   # the dropped sample: see ColdStep
            return
        for _ in range(step.warmup):
            step.call()
        self.calls = step.calls or self._calibrate()

    def _calibrate(self):
        calls = 1
        while self._time(calls) < 0.02:
            calls *= 2
        return calls

    def _time(self, calls):
        call = self.step.call
        self.sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        self.sync()
        return time.perf_counter() - t0

    def sample(self):
        """One sample: µs per call."""
        if isinstance(self.step, ColdStep):
            self.sync()
            t0 = time.perf_counter()
            fresh = self.step.make()
            for _ in range(self.calls):
                fresh()
            self.sync()
            return (time.perf_counter() - t0) / self.calls * 1e6
        return self._time(self.calls) / self.calls * 1e6


def make_timers(framework, name, modes):
    """{mode: Timer or the reason it cannot run}. A mode whose setup raises gets the error's text."""
    try:
        steps = framework.setup(name, modes)
    except Unsupported as why:
        return {mode: str(why) for mode in modes}
    timers = {}
    for mode in modes:
        step = steps.get(mode, f"no {mode} mode")
        if isinstance(step, str):
            timers[mode] = step
            continue
        try:
            timers[mode] = Timer(step, framework.sync)
        except Exception as error:  # noqa: BLE001 -- a failed trace or compile is a result, not a crash
            timers[mode] = one_line(f"{type(error).__name__}: {error}")
    return timers


def one_line(text, limit=160):
    """An error's text on one line, cut to `limit` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def serve(framework):
    """The peer loop: see the module docstring."""
    for line in framework.versions():
        print(line)
    print("ready", flush=True)
    timers = {}
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        words = line.split()
        if len(words) < 2:
            print(f"fail not a command: {line.strip()}", flush=True)
            continue
        command, name, rest = words[0], words[1], words[2:]
        if command == "setup":
            timers[name] = make_timers(framework, name, rest)
            for mode, timer in timers[name].items():
                print(f"fail {mode} {timer}" if isinstance(timer, str) else f"ok {mode} {timer.calls}")
            print("ready", flush=True)
        elif command == "sample":
            timer = timers.get(name, {}).get(rest[0], "not set up")
            try:
                print(f"fail {timer}" if isinstance(timer, str) else f"{timer.sample():.4f}", flush=True)
            except Exception as error:  # noqa: BLE001 -- report it; tapedeck drops the column
                print(f"fail {one_line(error)}", flush=True)
        elif command == "done":
            timers.pop(name, None)
            framework.drop(name)
            print("ready", flush=True)
        else:
            print(f"fail unknown command {command}", flush=True)


def standalone(framework, names, modes, samples):
    """Time each workload's modes, samples interleaved, and print "W2 eager <min> <median>" lines."""
    for line in framework.versions():
        print(line, flush=True)
    for name in names:
        timers = make_timers(framework, name, modes)
        ready = {mode: t for mode, t in timers.items() if not isinstance(t, str)}
        for mode, timer in timers.items():
            if isinstance(timer, str):
                print(f"# {name} {mode}: {timer}", file=sys.stderr)
        times = {mode: [] for mode in ready}
        for _ in range(samples):
            for mode, timer in ready.items():
                times[mode].append(timer.sample())
        for mode, values in times.items():
            print(f"{name} {mode} {min(values):.3f} {statistics.median_low(values):.3f}", flush=True)
        framework.drop(name)


def main(make_framework, all_names):
    """Parse the command line (module docstring), make the framework, serve or run standalone.
    make_framework(device) -> Framework; all_names: the workloads in order."""
    argv = sys.argv[1:]
    device, modes, serving = "cpu", None, False
    while argv and argv[0].startswith("--"):
        option = argv.pop(0)
        if option == "--serve":
            serving = True
        elif option == "--device":
            device = argv.pop(0)
        elif option == "--modes":
            modes = argv.pop(0).split(",")
        else:
            sys.exit(f"unknown option {option}")
    framework = make_framework(device)
    if serving:
        serve(framework)
        return
    samples = int(argv[0]) if argv else 25
    wanted = [n.upper() for n in argv[1:]]
    # W9 selects W9A, W9B and W9C; W10 selects W10A and W10B
    names = [n for n in all_names if not wanted or n in wanted or re.match(r"W\d+", n).group() in wanted]
    standalone(framework, names, modes or list(framework.modes), samples)
