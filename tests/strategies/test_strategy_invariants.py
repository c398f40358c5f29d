"""The invariants every strategy of ``es.strategy`` keeps, under real mpiexec: bit-identical
parameters for a plain run and any rank count (populations not divisible by it), static and
dynamic schedules; exact resume on another rank count; only scalars on the wire (bytes per
generation independent of the parameter count). A strategy added to STRATEGY_NAMES is tested
here without further ado, with a built-in policy and with a user's torch module."""

import numpy as np
import pytest
from conftest import load_params, read_progress, run_cli

from es.config import STRATEGY_NAMES

# Members not divisible by 2 or 3 ranks: 5 mirrored pairs; 7 unmirrored members for CMA-ES,
# which samples its own (not mirrored) population. ``sepcma-tpa``: sep-CMA-ES with two-point
# step-size adaptation (its default from 300 parameters), whose first two members every rank
# places along the last mean shift itself.
SETTINGS = {"cma": ["--set", "es.mirrored=false", "--set", "es.population=7"],
            "sepcma-tpa": ["--set", "sepcma.step_size=tpa"],
            # ARS whose contrast phase (its own b, nu and alpha) starts at generation 3: after
            # the resume at 2.
            "ars-contrast": ["--set", "ars.top=2", "--set", "ars.contrast_from=3",
                             "--set", "ars.contrast_lr=0.01", "--set", "ars.contrast_sigma=0.05",
                             "--set", "ars.contrast_top=5"]}
VARIANTS = [*STRATEGY_NAMES, "sepcma-tpa", "ars-contrast"]
BASE = ["configs/pendulum.toml", "--set", "es.population=10", "--set", "run.eval_every=2",
        "--set", "env.max_episode_steps=60", "--quiet"]
#: The built-in linear policy, and a torch MLP from examples/torch_policies.py (a user's
#: factory, imported from the folder es-train runs in).
POLICIES = {"linear": ["--set", "policy.kind=linear"],
            "torch": ["--set", "policy.kind=examples.torch_policies:mlp",
                      "--set", "policy.kwargs.hidden=8"]}
#: Every strategy with the linear policy; the torch policy with one strategy: a strategy sees
#: only the flat parameter vector, so what the torch case adds (a user's module, rebuilt
#: alike on every rank) does not depend on which. (Unmirrored members played side by side:
#: tests/rl/test_user_policies.py's lockstep test.)
CASES = [(variant, "linear") for variant in VARIANTS] + [("openai", "torch")]


def args(variant: str, *extra: str, policy: str = "linear") -> list[str]:
    strategy = variant.partition("-")[0]
    return ["es-train", *BASE, *POLICIES[policy], "--set", f"es.strategy={strategy}",
            *SETTINGS.get(variant, []), *extra]


@pytest.mark.parametrize(("strategy", "policy"), CASES)
def test_parameters_are_bit_identical_for_any_rank_count_schedule_and_resume(tmp_path, strategy,
                                                                           policy):
    """One plain process against MPI on 1 and 3 ranks (not for torch), 2 (dynamic schedule),
    and against a run of 2 ranks resumed on 3 halfway."""
    params = {}
    # One rank under MPI is one process under another communicator: the strategies' case.
    # The torch case's cost is its module (2.5 s of import) in every rank: its 3 ranks are
    # those of the resumed half.
    runs = (((None, "static"), (1, "static"), (2, "dynamic"), (3, "static")) if policy != "torch"
            else ((None, "static"), (2, "dynamic")))
    for ranks, schedule in runs:
        run_dir = tmp_path / f"{ranks}{schedule}"
        done = run_cli(args(strategy, "--set", "run.generations=4", "--set",
                            f"run.schedule={schedule}", "--run-dir", str(run_dir),
                            policy=policy), ranks=ranks)
        assert done.returncode == 0, done.stderr
        params[ranks, schedule] = load_params(run_dir)
    split = tmp_path / "split"
    first = run_cli(args(strategy, "--set", "run.generations=2", "--set",
                         "run.checkpoint_every=1", "--run-dir", str(split), policy=policy),
                    ranks=2)
    assert first.returncode == 0, first.stderr
    resumed = run_cli(["es-train", "--resume", str(split), "--set", "run.generations=4",
                       "--quiet"], ranks=3)
    assert resumed.returncode == 0, resumed.stderr
    params["resumed on 3 ranks"] = load_params(split)
    plain = params.pop((None, "static"))
    assert np.isfinite(plain).all()
    for key, value in params.items():
        assert np.array_equal(value, plain), f"{strategy}: {key} differs from the plain run"


@pytest.mark.parametrize("strategy", [*STRATEGY_NAMES, "sepcma-tpa"])
def test_bytes_per_generation_do_not_grow_with_the_parameters(tmp_path, strategy):
    sent = {}
    sizes = {"linear": ["--set", "policy.kind=linear"],
             "mlp": ["--set", "policy.kind=mlp", "--set", "policy.hidden=[64, 64]"]}
    if strategy == "openai":  # the strategy sees the same flat vector from a torch module
        sizes["torch"] = ["--set", "policy.kind=examples.torch_policies:mlp",
                          "--set", "policy.kwargs.hidden=64"]
    for name, policy in sizes.items():
        run_dir = tmp_path / name
        # The static schedule: its bytes are exact. The dynamic one's requests for members
        # depend on who finishes first (bounded: tests/parallel/test_mpi.py).
        done = run_cli(args(strategy, "--set", "run.generations=2", "--set",
                            "run.schedule=static", *policy, "--run-dir", str(run_dir)), ranks=2)
        assert done.returncode == 0, done.stderr
        sent[name] = [int(row["bytes_sent"]) for row in read_progress(run_dir)]
        # linear: 3x1 + 1; MLP and the torch MLP: 3-64-64-1
        assert load_params(run_dir).size == (4 if name == "linear" else 4481)
    assert sent["linear"] and all(bytes_sent == sent["linear"] for bytes_sent in sent.values()), \
        f"{strategy}: {sent}"
