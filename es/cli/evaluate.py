"""``es-eval``: play a run's trained mean policy (or a random one) on seeded episodes, and
optionally record one as a video."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import es.cli.threads  # noqa: F401  (one BLAS thread per process, before NumPy loads)
from es.cli.args import (
    USAGE_ERROR,
    ArgumentParser,
    add_flag,
    fail,
    interruptible,
    output_file_error,
    positive_int,
    survive_closed_stdout,
)

#: ``--policy`` choices and the files they name in a run folder.
POLICY_FILES = {"final": "policy.npz", "best": "policy_best.npz"}
#: Seconds a frame above which a full-quality MuJoCo video gets the --video-quality hint
#: (Gymnasium's scene in software: ~90 ms; on a GPU: ~1 ms).
SLOW_FRAME_S = 0.03


def parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="es-eval", description="Evaluate the trained mean policy of a run (no noise).",
        examples=["es-eval runs/CartPole-v1__cartpole__0__20250101-120000 --episodes 20",
                  "es-eval RUN_DIR --policy best --episodes 20",
                  "es-eval RUN_DIR --video cartpole.mp4 --json returns.json",
                  "es-eval RUN_DIR --random"],
    )
    parser.add_argument("run_dir", help="a run folder written by es-train")
    parser.add_argument("--policy", choices=POLICY_FILES, default=None,
                        help="final (default): the run's last mean policy (policy.npz); "
                             "best: the one whose best evaluation was confirmed on "
                             "run.best_episodes fresh episodes (policy_best.npz)")
    add_flag(parser, "--episodes", default=10)
    add_flag(parser, "--seed", "the seed of the first episode; episode i plays seed N + i",
             default=12345)
    parser.add_argument("--video", metavar="PATH",
                        help="also record one episode of the policy to PATH (.mp4 or .gif)")
    parser.add_argument("--video-steps", type=positive_int, default=None,
                        help="stop the video after this many steps (default: the episode)")
    parser.add_argument("--camera", metavar="NAME",
                        help="with --video, a MuJoCo env: the model's camera to film through, "
                             "or 'free' for Gymnasium's default (default: the model's 'track' "
                             "camera, which follows the body, where it has one)")
    parser.add_argument("--video-quality", choices=["full", "fast"], default="full",
                        help="with --video, a MuJoCo env: 'fast' films without shadows, "
                             "reflections and antialiasing, ~10x faster where OpenGL renders "
                             "in software (no GPU); other envs render one way")
    parser.add_argument("--unclipped", action="store_true",
                        help="play a built-in policy's continuous actions as computed, not "
                             "clipped to the action space's bounds: the objective of ARS's and "
                             "the ES paper's code, where MuJoCo charges its control cost on the "
                             "whole action (policy.clip_actions = false trains for it)")
    parser.add_argument("--random", action="store_true",
                        help="evaluate a uniformly random policy on the same episodes instead")
    parser.add_argument("--json", metavar="PATH",
                        help="also write every episode's return and length to PATH (JSON)")
    return parser


def kept_none_why(run_dir: Path) -> str:
    """Why an es-train run folder holds no ``policy_best.npz``: it keeps none, or has kept
    none yet (a run training now confirms its nominations at its stops), where the one
    reason given had been "run.best_episodes = 0, or no evaluation yet" in both cases."""
    from es.config import ConfigError, load_config

    try:
        episodes = load_config(run_dir / "config.toml").run.best_episodes
    except (ConfigError, OSError):
        episodes = None
    if episodes == 0:
        return " (the run keeps none: run.best_episodes = 0; play --policy final)"
    return (" (none kept yet: a nomination is kept once it holds its confirmation "
            "episodes, at the run's stops unless run.best_share lets it confirm while "
            "training; play --policy final meanwhile)")


@interruptible("es-eval")
def main(argv: list[str] | None = None) -> int:
    survive_closed_stdout()
    args = parser().parse_args(argv)
    from es.parallel.comm import launcher_copies
    from es.parallel.launcher import launcher_rank

    if (copies := launcher_copies()) > 1:  # each copy would play and print the same episodes
        message = (f"es-eval plays its episodes in one process, and a launcher started "
                   f"{copies}: run it without mpiexec or srun")
        return fail("es-eval", message) if launcher_rank() == 0 else USAGE_ERROR

    import numpy as np

    from es.config import ConfigError, load_config
    from es.rl.checkpoint import load_policy, write_atomically
    from es.rl.envs import EnvIdError, check_env_id, env_from_config, without_time_limit
    from es.rl.policies import PolicyError
    from es.rl.rollout import failures_told_once, random_policy, safe_episode
    from es.rl.runs import first_few, run_folders_in, trained_by

    if args.random and args.unclipped:
        return fail("es-eval", "--unclipped and --random: a random policy's actions lie within "
                     "the bounds; give one of them")
    if args.random and args.policy is not None:
        return fail("es-eval", f"--policy {args.policy} and --random: --random plays a random "
                     "policy instead of the run's; give one of them")
    if args.video_steps is not None and not args.video:
        return fail("es-eval", f"--video-steps {args.video_steps}: only with --video")
    for flag, path, suffix in (("--video", args.video, ".mp4"), ("--json", args.json, ".json")):
        if path and (error := output_file_error(path, flag, suffix)):
            return fail("es-eval", error)
    args.policy = args.policy or "final"
    run_dir = Path(args.run_dir)
    policy_path = run_dir / POLICY_FILES[args.policy]
    try:
        if run_dir.exists() and not run_dir.is_dir():  # a run's file, or a config
            return fail("es-eval", f"run folder {args.run_dir!r}: is a file; give the run's "
                        f"folder, e.g. es-eval {shlex.quote(str(run_dir.parent))}"
                        if (run_dir.parent / "config.toml").is_file() else
                        f"run folder {args.run_dir!r}: is a file, not a run folder")
        if not run_dir.is_dir():
            return fail("es-eval", f"run folder {args.run_dir!r}: no such folder")
        if not policy_path.is_file() and (runs := run_folders_in(run_dir)):
            return fail("es-eval", f"{args.run_dir!r} is a folder of runs (a sweep's): "
                         f"evaluate one of them, e.g. es-eval {shlex.quote(str(run_dir / runs[0]))}"
                         f" ({first_few(runs)})")
        if not policy_path.is_file():
            why = "" if args.policy != "best" or not (run_dir / "policy.npz").is_file() else (
                kept_none_why(run_dir) if (program := trained_by(run_dir)) == "es-train" else
                f" ({program} keeps no best policy: play --policy final)")
            return fail("es-eval", f"run folder {args.run_dir!r}: no {policy_path.name} in "
                         f"it{why}")
        if not zipfile.is_zipfile(policy_path):
            return fail("es-eval", f"{str(policy_path)!r}: unreadable policy (not an .npz "
                         "archive: truncated, or another kind of file)")
        config = load_config(run_dir / "config.toml")
        try:
            check_env_id(config.env.id)  # its module may be gone from where es-eval runs
        except EnvIdError as error:
            if ":" in config.env.id:
                raise
            raise EnvIdError(f"{error}; an env the training script registered itself is "
                             "registered in that process only: register it in a module and "
                             "train with env.id = 'module:ID', which imports it") from None
        policy = load_policy(policy_path)
        if policy.env_id != config.env.id:
            raise ValueError(f"it is for {policy.env_id!r}, config.toml for {config.env.id!r}")
        if not np.isfinite(policy.params).all():  # played, it scored as a policy would
            bad = int(np.count_nonzero(~np.isfinite(policy.params)))
            raise PolicyError(f"{str(policy_path)!r}: {bad} of its {policy.params.size} "
                              "parameters are NaN or inf: nothing to play (es-train stops a "
                              "run before it would save such a policy)")
        mean, std = policy.norm.mean, policy.norm.std
        if not (np.isfinite(mean).all() and np.isfinite(std).all() and (std > 0).all()):
            raise PolicyError(f"{str(policy_path)!r}: its observation normalisation holds NaN, "
                              "inf or a std <= 0 (obs_mean, obs_std): nothing to play "
                              "(es-train saves a finite mean and a std > 0)")
        env = env_from_config(config)
        if args.unclipped:
            policy = unclipped(policy)
        policy.act(env)  # a user's policy is rebuilt here: what fails says so in one line
    except (ConfigError, PolicyError, EnvIdError) as error:
        return fail("es-eval", str(error))
    except (OSError, KeyError, ValueError, TypeError, EOFError, zipfile.BadZipFile) as error:
        # A truncated or foreign file: the reading fails in any of numpy's or zipfile's ways.
        return fail("es-eval", f"{str(policy_path)!r}: unreadable policy "
                     f"({getattr(error, 'strerror', None) or error})")
    if args.camera is not None and not args.video:
        return fail("es-eval", f"--camera {args.camera!r}: only with --video")
    if args.video_quality != "full" and not args.video:
        return fail("es-eval", f"--video-quality {args.video_quality}: only with --video")
    if args.video:
        from es.rl.video import check_camera, check_video_path

        try:
            check_video_path(args.video)
            check_camera(env, args.camera)  # before any episode: no work lost to a typo
            renders(config, env)
        except (ValueError, ImportError) as error:
            return fail("es-eval", str(error))
    if args.random:
        def actor(episode_env: Any, seed: int) -> Callable[[Any], Any]:
            # Seeded by the episode's own seed: the video (seed --seed) replays episode 0.
            return random_policy(episode_env, seed)
    else:
        def actor(episode_env: Any, seed: int) -> Callable[[Any], Any]:
            return policy.act(episode_env)  # per episode: a recurrent state starts fresh
    if without_time_limit(config, env):  # once its checks are passed
        print(f"es-eval: warning: env.id = {config.env.id!r} has no time limit: an episode "
              "that never ends keeps es-eval playing (Ctrl-C stops it); env.max_episode_steps "
              "in the run's config.toml caps them", file=sys.stderr, flush=True)
    with failures_told_once(""):
        episodes = [safe_episode(env, actor(env, args.seed + i), args.seed + i,
                                 f"episode {i} (seed {args.seed + i})")
                    for i in range(args.episodes)]
    finished = [e for e in episodes if np.isfinite(e.total_return)]
    failed = len(episodes) - len(finished)
    if not finished:
        print(f"es-eval: error: {'all ' * (failed > 1)}{failed} episode{'s' * (failed > 1)} "
              "failed (see the warnings above)",
              file=sys.stderr)
        return 1
    returns = np.array([e.total_return for e in finished])
    lengths = np.array([e.length for e in finished])
    kept = "best" if args.policy == "best" else "mean"
    who = "random policy" if args.random else f"{kept} policy (generation {policy.generation}" + (
        ", actions unclipped)" if args.unclipped else ")")
    print(
        f"{policy.env_id}, {who}: return {returns.mean():.2f} ± {returns.std():.2f} over "
        f"{len(finished)} episode{'s' * (len(finished) != 1)} (min {returns.min():.2f}, "
        f"max {returns.max():.2f}, mean length {lengths.mean():.1f})"
        + (f"; {failed} of {args.episodes} episodes failed and are not in these figures"
           if failed else "")
    )
    if args.json:
        record = {"env": policy.env_id, "policy": args.policy, "unclipped": args.unclipped,
                  "generation": policy.generation, "seed": args.seed,
                  "random": args.random, "episodes": args.episodes, "failed": failed,
                  "returns": returns.tolist(), "lengths": lengths.tolist()}
        payload = (json.dumps(record, indent=1) + "\n").encode()
        try:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            write_atomically(Path(args.json), lambda handle: handle.write(payload))
        except OSError as error:
            return fail("es-eval", f"--json {args.json!r}: {error.strerror or error}")
    if args.video:
        return _write_video(config, actor, args)
    return 0


def unclipped(saved: Any) -> Any:
    """``saved`` (a ``SavedPolicy``) with its action bounds infinite: a built-in policy's
    continuous actions as computed. A ``PolicyError`` for other policies, which clip nothing
    of es's (a user's returns its own actions; discrete ones are chosen, not clipped)."""
    import dataclasses

    from es.rl.policies import PolicyError, PolicySpec

    spec = saved.spec
    if not isinstance(spec, PolicySpec) or spec.discrete:
        raise PolicyError("--unclipped: only a built-in linear or MLP policy with continuous "
                          "actions is clipped, and this run's policy is "
                          + ("one of discrete actions" if isinstance(spec, PolicySpec)
                             else "not one"))
    return dataclasses.replace(saved, spec=spec.unclipped())


def renders(config, env: Any) -> None:
    """Whether the env can be made to render frames, before any episode is played for the
    video: raises ValueError (a ConfigError) naming the render mode."""
    modes = list(env.metadata.get("render_modes") or [])
    if "rgb_array" not in modes:  # gymnasium would only warn, then the constructor fail
        raise ValueError(f"--video: {config.env.id} cannot render frames: its render_modes "
                         f"are {modes}, without 'rgb_array'")
    render_headless()
    import gymnasium as gym

    from es.rl.envs import env_from_config
    from es.rl.video import INSTALL_HINT

    filmed = env_from_config(config, render_mode="rgb_array")
    try:  # one frame: a renderer's missing library (pygame) is met here, not after the episodes
        filmed.reset(seed=0)
        filmed.render()
    except gym.error.DependencyNotInstalled as error:
        raise ValueError(f"--video: {config.env.id} cannot render frames: {error} (or "
                         f"{INSTALL_HINT}, which installs it)") from None
    finally:
        filmed.close()


def render_headless() -> None:
    """MuJoCo needs an OpenGL backend, EGL by default here (``MUJOCO_GL`` in the environment
    wins). Pygame (classic control) draws off-screen too: without a display SDL's default
    video driver printed a spurious "error: XDG_RUNTIME_DIR is invalid" on every video, so
    its dummy driver is the default."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")


def _write_video(config, actor: Callable[[Any, int], Callable[[Any], Any]],
                 args: argparse.Namespace) -> int:
    """One episode (seed ``--seed``) rendered headless (``render_headless``)."""
    render_headless()
    from gymnasium.error import DependencyNotInstalled

    from es.rl.envs import env_from_config
    from es.rl.video import record_video

    try:
        env = env_from_config(config, render_mode="rgb_array")
        began = time.perf_counter()
        written = record_video(env, actor(env, args.seed), Path(args.video), seed=args.seed,
                               max_steps=args.video_steps, camera=args.camera,
                               quality=args.video_quality)
        seconds = time.perf_counter() - began
    except (ImportError, RuntimeError, ValueError, DependencyNotInstalled) as error:
        return fail("es-eval", str(error))
    except OSError as error:  # a path the check let through that cannot be opened (/proc/x)
        return fail("es-eval", f"--video {args.video!r}: {error.strerror or error}")
    camera = f", camera {written['camera']!r}" if written["camera"] else ""
    print(f"wrote {args.video}: {written['frames']} frames in {seconds:.1f} s, return "
          f"{written['return']:.2f}{camera}")
    per_frame = seconds / written["frames"]
    if (per_frame > SLOW_FRAME_S and args.video_quality == "full"
            and hasattr(env.unwrapped, "mujoco_renderer")):
        print(f"es-eval: filming took ~{1000 * per_frame:.0f} ms a frame (OpenGL in software?); "
              "--video-quality fast films without shadows, reflections and antialiasing, "
              "~10x faster", file=sys.stderr)
    return 0
