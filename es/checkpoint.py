"""Files a run leaves behind: written atomically, read without pickle.

``policy.npz`` holds everything ``es-eval`` needs to rebuild the trained mean policy: the
flat parameters, the observation normalisation and the policy's architecture.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

import numpy as np

from es.policies import ObsNorm, PolicySpec


def write_atomically(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write through a temp file in the same folder, fsync, then rename over ``path``.

    A reader (or a crash) sees either the old file or the new one, never half of one.
    """
    path = Path(path)
    descriptor, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def save_policy(
    path: Path, spec: PolicySpec, params: np.ndarray, norm: ObsNorm, env_id: str, generation: int
) -> None:
    arrays = {
        "params": np.asarray(params, dtype=np.float32),
        "obs_mean": np.asarray(norm.mean, dtype=np.float32),
        "obs_std": np.asarray(norm.std, dtype=np.float32),
        "obs_clip": np.array(norm.clip, dtype=np.float64),
        "kind": np.array(spec.kind),
        "obs_dim": np.array(spec.obs_dim),
        "act_dim": np.array(spec.act_dim),
        "discrete": np.array(spec.discrete),
        "hidden": np.array(spec.hidden, dtype=np.int64),
        "activation": np.array(spec.activation),
        "action_low": np.array(spec.action_low, dtype=np.float64),
        "action_high": np.array(spec.action_high, dtype=np.float64),
        "env_id": np.array(env_id),
        "generation": np.array(generation),
    }
    write_atomically(path, lambda handle: np.savez(handle, **arrays))


def load_policy(path: Path) -> tuple[PolicySpec, np.ndarray, ObsNorm, str]:
    """(spec, params, obs normalisation, env id) from a ``policy.npz``."""
    with np.load(path, allow_pickle=False) as data:
        spec = PolicySpec(
            kind=str(data["kind"]),
            obs_dim=int(data["obs_dim"]),
            act_dim=int(data["act_dim"]),
            discrete=bool(data["discrete"]),
            hidden=tuple(int(h) for h in data["hidden"]),
            activation=str(data["activation"]),
            action_low=tuple(float(v) for v in data["action_low"]),
            action_high=tuple(float(v) for v in data["action_high"]),
        )
        norm = ObsNorm(data["obs_mean"].copy(), data["obs_std"].copy(), float(data["obs_clip"]))
        return spec, data["params"].copy(), norm, str(data["env_id"])
