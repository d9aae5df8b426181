#!/usr/bin/python3
"""make_optim_oracle.py: PyTorch's optimizer steps and learning-rate schedules, as Lua data.

    /usr/bin/python3 tests/oracle/make_optim_oracle.py

writes tests/oracle/optim_oracle_data.lua, which tests/lua/test_optim_oracle.lua checks tapedeck
against (to 1e-10 in float64). Two float64 parameters (a [3,2] matrix and a [4] vector) get fixed
gradients for 4 steps (the vector has none at step 3, so per-parameter step counts differ); each
case is one optimizer with one set of options, and stores the parameters after every step and the
state_dict's state at the end. Cases with a scheduler step it after each optimizer step. The
scheduler rows store get_last_lr() at construction and after each of 20 scheduler steps, for an
SGD with two param groups (lr 0.1 and 0.05).

PyTorch 1.13 differs from 2.x in one way visible here: 1.13's SGD keeps {momentum_buffer = None}
for momentum 0 and RMSprop keeps step as a Python int; 2.x keeps no SGD state without momentum and
a tensor step. The data follows 2.x (empty SGD entries dropped; steps written as numbers).
"""
import math
import os
import numpy as np
import torch

STEPS = 4
rng = np.random.default_rng(7)
INITIAL = [rng.standard_normal((3, 2)), rng.standard_normal(4)]
GRADS = [[rng.standard_normal((3, 2)), rng.standard_normal(4)] for _ in range(STEPS)]
GRADS[2][1] = None   # the vector has no gradient at step 3

CASES = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.3}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.05}),
    ("SGD", {"lr": 0.05, "momentum": 0.5, "weight_decay": 0.1, "maximize": True}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.01, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.01, "amsgrad": True}),
    ("Adam", {"lr": 0.02, "maximize": True, "amsgrad": True, "weight_decay": 0.01}),
    ("AdamW", {"lr": 0.01}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.3, "amsgrad": True}),
    ("AdamW", {"lr": 0.01, "betas": (0.5, 0.6), "maximize": True}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "eps": 1e-4, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9}),
    ("RMSprop", {"lr": 0.01, "centered": True}),
    ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5, "maximize": True}),
    ("Adagrad", {"lr": 0.1}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.1, "weight_decay": 0.1}),
    ("Adagrad", {"lr": 0.1, "initial_accumulator_value": 0.5, "eps": 1e-6, "maximize": True}),
]
# (optimizer, options, per-group lrs, scheduler): two param groups, and/or an lr changed between steps.
GROUP_CASES = [
    ("Adam", {"lr": 0.01}, [0.01, 0.03], None),
    ("SGD", {"lr": 0.1, "momentum": 0.9}, [0.1, 0.2], ("StepLR", {"step_size": 1, "gamma": 0.5})),
    ("Adam", {"lr": 0.05}, None, ("CosineAnnealingLR", {"T_max": 3, "eta_min": 0.001})),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.05}, None, ("LambdaLR", {})),
]


def lua_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(float(v)) if isinstance(v, float) else str(v)
    if isinstance(v, (tuple, list)):
        return "{" + ", ".join(lua_value(x) for x in v) + "}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {lua_value(x)}" for k, x in sorted(v.items())) + "}"
    if isinstance(v, torch.Tensor):
        return lua_value([float(x) for x in v.detach().reshape(-1).tolist()])
    if isinstance(v, np.ndarray):
        return lua_value([float(x) for x in v.reshape(-1)])
    if v is None:
        return "false"
    raise TypeError(type(v))


def lambda_factor(epoch):   # LambdaLR's function; test_optim_oracle.lua has the same one
    return 1.0 / (epoch + 1)


def make_scheduler(opt, spec):
    name, options = spec
    if name == "LambdaLR":
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda_factor)
    return getattr(torch.optim.lr_scheduler, name)(opt, **options)


def run_case(name, options, group_lrs=None, scheduler_spec=None):
    params = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in INITIAL]
    if group_lrs:
        groups = [{"params": [p], "lr": lr} for p, lr in zip(params, group_lrs)]
        opt = getattr(torch.optim, name)(groups, **options)
    else:
        opt = getattr(torch.optim, name)(params, **options)
    scheduler = make_scheduler(opt, scheduler_spec) if scheduler_spec else None
    after = []
    for step in range(STEPS):
        for p, g in zip(params, GRADS[step]):
            p.grad = None if g is None else torch.tensor(g, dtype=torch.float64)
        opt.step()
        if scheduler:
            scheduler.step()
        after.append([p.detach().clone() for p in params])
    state = {}
    for index, entry in opt.state_dict()["state"].items():
        kept = {k: (float(v) if k == "step" else v) for k, v in entry.items() if v is not None}
        if kept:
            state[index] = kept
    return after, state


def case_row(name, options, group_lrs=None, scheduler_spec=None):
    after, state = run_case(name, options, group_lrs, scheduler_spec)
    state_lua = ", ".join(f"[{i}] = {lua_value(entry)}" for i, entry in sorted(state.items()))
    fields = [f'name = "{name}"', f"options = {lua_value(options)}"]
    if group_lrs:
        fields.append(f"group_lrs = {lua_value(group_lrs)}")
    if scheduler_spec:
        fields.append(f'scheduler = {{"{scheduler_spec[0]}", {lua_value(scheduler_spec[1])}}}')
    fields.append("after = {" + ", ".join(lua_value(step) for step in after) + "}")
    fields.append("state = {" + state_lua + "}")
    return "    {" + ",\n     ".join(fields) + "},"


def schedule_row(spec):
    params = [torch.zeros(2, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    opt = torch.optim.SGD([{"params": [params[0]], "lr": 0.1}, {"params": [params[1]], "lr": 0.05}], lr=0.1)
    scheduler = make_scheduler(opt, spec)
    lrs = [scheduler.get_last_lr()]
    for _ in range(20):
        opt.step()
        scheduler.step()
        lrs.append(scheduler.get_last_lr())
    return f'    {{"{spec[0]}", {lua_value(spec[1])}, lrs = {lua_value(lrs)}}},'


def main():
    lines = [
        f"-- optim_oracle_data.lua: made by tests/oracle/make_optim_oracle.py with PyTorch {torch.__version__}; do not edit.",
        "-- initial: the two float64 parameters (flat values; shapes [3,2] and [4]); grads[step][i] (false:",
        "-- no gradient); cases: parameters after each step and the state_dict's state (0-based) at the end;",
        "-- schedules: get_last_lr() at construction and after each of 20 steps (SGD, groups lr 0.1, 0.05).",
        "return {",
        f"  initial = {lua_value(INITIAL)},",
        f"  shapes = {{{{3, 2}}, {{4}}}},",
        "  grads = {" + ", ".join(lua_value(step) for step in GRADS) + "},",
        "  cases = {",
    ]
    lines += [case_row(name, options) for name, options in CASES]
    lines += [case_row(*case) for case in GROUP_CASES]
    lines += ["  },", "  schedules = {"]
    lines += [schedule_row(spec) for spec in [("StepLR", {"step_size": 3, "gamma": 0.5}),
                                              ("StepLR", {"step_size": 2}),
                                              ("CosineAnnealingLR", {"T_max": 5, "eta_min": 0.01}),
                                              ("CosineAnnealingLR", {"T_max": 7}),
                                              ("LambdaLR", {})]]
    lines += ["  },", "}"]
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim_oracle_data.lua")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
