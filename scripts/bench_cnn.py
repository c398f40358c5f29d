"""Cost of the DQN-Nature CNN policy per environment step, beside the Atari step it serves.

    python scripts/bench_cnn.py                # writes bench-results/bench_cnn/results.csv

On one core: the batch-1 forward pass with and without virtual batch norm, the VBN statistics of
a reference batch (once per episode), and one step of preprocessed Pong under a random policy,
whose frames are also the network's inputs. The forward pass is mostly float32 matmuls, so set
``OPENBLAS_CORETYPE`` (e.g. ``SkylakeX`` on an AVX-512 CPU that OpenBLAS files under Haswell) to
compare BLAS kernels.
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # each MPI rank runs single-threaded BLAS
os.environ["OMP_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402
from report import emit, run_script, script_parser  # noqa: E402

from es.cli.args import add_flag, add_out, positive_int  # noqa: E402
from es.rl.atari import make_atari_env  # noqa: E402
from es.rl.cnn import TORSOS, ConvNetSpec, bind, vbn_statistics  # noqa: E402


def make_pong() -> gymnasium.Env:
    """Pong as es-train makes it: 4-frame skip, 84x84 grey, a stack of 4 frames."""
    return make_atari_env("ALE/Pong-v5")


def time_env_steps(steps: int, seed: int) -> tuple[list[float], np.ndarray]:
    """Seconds per step of a random policy (resets not timed), and the observations seen."""
    env = make_pong()
    rng = np.random.default_rng(seed)
    observation, _ = env.reset(seed=seed)
    observations, times = [observation], []
    for _ in range(steps):
        action = int(rng.integers(env.action_space.n))
        started = time.perf_counter()
        observation, _, terminated, truncated, _ = env.step(action)
        times.append(time.perf_counter() - started)
        observations.append(observation)
        if terminated or truncated:
            observation, _ = env.reset()
    env.close()
    return times, np.stack(observations)


def time_forward(logits: Callable[[np.ndarray], np.ndarray], observations: np.ndarray,
                 calls: int, warmup: int = 200) -> list[float]:
    """Seconds per call, cycling through real frames after a warm-up."""
    times = []
    for index in range(warmup + calls):
        observation = observations[index % len(observations)]
        started = time.perf_counter()
        logits(observation)
        times.append(time.perf_counter() - started)
    return times[warmup:]


def time_statistics(spec: ConvNetSpec, params: np.ndarray, reference: np.ndarray,
                    repeats: int) -> list[float]:
    times = []
    for _ in range(repeats + 1):  # the first call allocates and warms caches; dropped
        started = time.perf_counter()
        vbn_statistics(spec, params, reference)
        times.append(time.perf_counter() - started)
    return times[1:]


def row(measure: str, params: int | str, times: list[float], env_step_us: float | None) -> dict:
    median_us = 1e6 * float(np.median(times))
    return {
        "measure": measure, "params": params, "calls": len(times), "median_us": median_us,
        "p90_us": 1e6 * float(np.percentile(times, 90)),
        "vs_env_step": median_us / env_step_us if env_step_us else "",
        # OpenBLAS picks its kernels by CPU; this overrides it (e.g. SkylakeX for AVX-512)
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "auto"),
    }


def parser() -> argparse.ArgumentParser:
    parse = script_parser(__file__, __doc__, [
        "python scripts/bench_cnn.py",
        "OPENBLAS_CORETYPE=SkylakeX python scripts/bench_cnn.py --calls 500 --out /tmp/cnn"])
    parse.add_argument("--calls", type=positive_int, default=2000,
                       help="timed forward calls (default: %(default)s)")
    parse.add_argument("--env-steps", type=positive_int, default=2000,
                       help="timed Pong steps (default: %(default)s)")
    parse.add_argument("--reference", type=positive_int, default=128,
                       help="VBN reference batch size, drawn from the Pong steps' observations")
    parse.add_argument("--actions", type=positive_int, default=6,
                       help="logits (Pong has 6 actions)")
    add_flag(parse, "--seed", "of the random actions and the networks' parameters", default=0)
    add_out(parse, "bench_cnn")
    return parse


def main() -> None:
    parse = parser()
    args = parse.parse_args()
    if args.reference > args.env_steps:
        parse.error(f"--reference {args.reference}: at most --env-steps ({args.env_steps}), "
                    "the observations it is drawn from")

    env_times, observations = time_env_steps(args.env_steps, args.seed)
    env_step_us = 1e6 * float(np.median(env_times))
    rng = np.random.default_rng(args.seed)
    reference = observations[rng.choice(len(observations), args.reference, replace=False)]
    rows = [row("Pong step, random policy", "", env_times, env_step_us)]
    for torso, (convs, dense) in TORSOS.items():
        for vbn in (True, False):
            spec = ConvNetSpec(args.actions, convs=convs, dense=dense, vbn=vbn)
            params = spec.initial_params(rng)
            stats = vbn_statistics(spec, params, reference) if vbn else None
            times = time_forward(bind(spec, params, stats), observations, args.calls)
            rows.append(row(f"{torso}: forward batch 1, vbn={vbn}", spec.num_params, times,
                            env_step_us))
            if vbn:
                times = time_statistics(spec, params, reference, repeats=5)
                rows.append(row(f"{torso}: vbn_statistics, {args.reference} obs",
                                spec.num_params, times, None))
    emit(rows, args.out, "CNN torsos (4x84x84) vs preprocessed ALE/Pong-v5 step, one core, "
         "OPENBLAS_NUM_THREADS=1")


if __name__ == "__main__":
    run_script(main)
