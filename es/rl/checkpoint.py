"""Files a run leaves behind: written atomically, read without pickle.

``policy.npz`` holds everything ``es-eval`` needs to rebuild the trained mean policy: the
flat parameters, the observation normalisation and the policy's architecture.

``checkpoints/ckpt-GGGGGGGG.{npz,json}`` hold everything else a run needs to continue exactly:
the strategy's state (parameters ``theta``, optimizer moments or adapted sigmas),
observation statistics and counters (npz), and the resolved
config, a sha256 of the npz and one of the JSON's other fields (JSON), so a truncated or
tampered file is detected.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import gymnasium as gym
import numpy as np

from es.rl.cnn import ConvNetSpec
from es.rl.kept import Nomination
from es.rl.policies import ObsNorm, PolicyError, PolicySpec, bind_policy
from es.rl.policy import UserPolicy, build_user_policy, import_object, is_instance


def _process_umask() -> int:
    """The process's umask, which can only be read by setting it (and back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: The mode ``open()`` would give a new file: mkstemp's 0600 would hide a run's policies and
#: checkpoints from the rest of a cluster group that reads its progress.csv.
FILE_MODE = 0o666 & ~_process_umask()


def write_atomically(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write through a temp file in the same folder, fsync, then rename over ``path``.

    A reader (or a crash) sees either the old file or the new one, never half of one.
    """
    path = Path(path)
    descriptor, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(descriptor, FILE_MODE)
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
    path: Path,
    spec: PolicySpec | ConvNetSpec | UserPolicy,
    params: np.ndarray,
    norm: ObsNorm,
    env_id: str,
    generation: int,
    reference: np.ndarray | None = None,
) -> None:
    """The mean policy and all it needs to act: architecture (a user's policy: its factory
    and keyword arguments), observation normalisation and, for a CNN with virtual batch norm,
    the reference batch (``reference``, or the spec's own)."""
    arrays = {
        "params": np.asarray(params, dtype=np.float32),
        "obs_mean": np.asarray(norm.mean, dtype=np.float32),
        "obs_std": np.asarray(norm.std, dtype=np.float32),
        "obs_clip": np.array(norm.clip, dtype=np.float64),
        "env_id": np.array(env_id),
        "generation": np.array(generation),
    }
    if isinstance(spec, UserPolicy):
        arrays |= {"kind": np.array("user"), "factory": np.array(spec.name),
                   "kwargs": np.array(json.dumps(spec.kwargs)),
                   "obs_norm": np.array(spec.normalise)}
    elif isinstance(spec, ConvNetSpec):
        reference = reference if reference is not None else spec.reference
        arrays |= {
            "kind": np.array("cnn"),
            "n_outputs": np.array(spec.n_outputs),
            "input_shape": np.array(spec.input_shape, dtype=np.int64),
            "convs": np.array(spec.convs, dtype=np.int64).reshape(-1, 3),
            "dense": np.array(spec.dense),
            "vbn": np.array(spec.vbn),
            "vbn_eps": np.array(spec.vbn_eps, dtype=np.float64),
        }
        if reference is not None:
            arrays["vbn_reference"] = reference
    else:
        arrays |= {
            "kind": np.array(spec.kind),
            "obs_dim": np.array(spec.obs_dim),
            "act_dim": np.array(spec.act_dim),
            "discrete": np.array(spec.discrete),
            "hidden": np.array(spec.hidden, dtype=np.int64),
            "activation": np.array(spec.activation),
            "action_low": np.array(spec.action_low, dtype=np.float64),
            "action_high": np.array(spec.action_high, dtype=np.float64),
        }
    write_atomically(path, lambda handle: np.savez(handle, **arrays))


@dataclass(frozen=True)
class UserPolicySpec:
    """A user's policy as ``policy.npz`` names it: rebuilt from its factory for an env."""

    factory: str  # "module:factory"
    kwargs: dict[str, Any]
    obs_norm: bool


@dataclass
class SavedPolicy:
    """A ``policy.npz`` read back."""

    spec: PolicySpec | ConvNetSpec | UserPolicySpec
    params: np.ndarray
    norm: ObsNorm
    env_id: str
    generation: int
    reference: np.ndarray | None = None

    def __repr__(self) -> str:
        """A summary: the generated repr printed the parameters and a CNN's reference batch
        of frames (200 lines under a notebook cell)."""
        kind = (self.spec.factory if isinstance(self.spec, UserPolicySpec)
                else type(self.spec).__name__)
        return (f"SavedPolicy(env={self.env_id!r}, policy={kind}, generation={self.generation}, "
                f"params: {self.params.size})")

    def act(self, env: gym.Env | None = None,
            policy: Any = None) -> Callable[[Any], Any]:
        """One episode's ``observation -> action`` (make one per episode: a recurrent policy
        starts each with a fresh state). A user's policy is rebuilt from its factory for
        ``env`` (its spaces), or ``policy`` (the object itself) is used."""
        if not isinstance(self.spec, UserPolicySpec):
            return _checked_observations(
                bind_policy(self.spec, self.params, self.norm, self.reference),
                self.spec.obs_dim)
        if env is None:
            raise ValueError(f"policy {self.spec.factory!r}: a user's policy is rebuilt for "
                             "its environment: act(env)")
        source = policy if policy is not None else import_object(self.spec.factory,
                                                                  "policy.kind")
        made = build_user_policy(source, env, {} if is_instance(source) else self.spec.kwargs,
                                 self.spec.obs_norm, self.spec.factory)
        if made.num_params != self.params.size:  # torch would load a longer vector's start
            raise PolicyError(
                f"policy.kind = {self.spec.factory!r}: the saved policy has "
                f"{self.params.size} parameters, the rebuilt one {made.num_params}: the "
                "factory now builds another network than the one trained (its code or "
                "defaults changed, or an instance trained with constructor arguments is "
                "rebuilt with its defaults)")
        bound = made.bind(self.params, self.norm)
        space = env.observation_space
        if isinstance(space, gym.spaces.Box):  # a vector or frames: checked as a built-in's
            return _checked_observations(bound, int(np.prod(space.shape)))
        return bound


def _checked_observations(act: Callable[[Any], Any], size: int) -> Callable[[Any], Any]:
    """``act`` that refuses, in one line, an observation of another size or not of numbers
    (a user calling ``run.policy`` by hand), where numpy's broadcasting error named
    neither; training binds its policies without this."""
    def checked(observation: Any) -> Any:
        if isinstance(observation, tuple) and len(observation) == 2 \
                and isinstance(observation[1], dict):
            raise ValueError("observation is a pair (observation, info), as env.reset() "
                             "returns it: pass its first item, observation, _ = env.reset()")
        try:
            array = np.asarray(observation)
        except ValueError:  # ragged: numpy's "inhomogeneous shape" named neither
            array = np.asarray(observation, dtype=object)
        if array.size != size or not np.issubdtype(array.dtype, np.number):
            raise ValueError(f"observation of shape {array.shape} ({array.dtype}): the policy "
                             f"takes {size} numbers, as the env it was trained on gives them")
        return act(array)

    return checked


def _spec_from(data: Any) -> PolicySpec | ConvNetSpec | UserPolicySpec:
    if str(data["kind"]) == "user":
        return UserPolicySpec(str(data["factory"]), json.loads(str(data["kwargs"])),
                              bool(data["obs_norm"]))
    if str(data["kind"]) == "cnn":
        return ConvNetSpec(
            n_outputs=int(data["n_outputs"]),
            input_shape=tuple(int(v) for v in data["input_shape"]),
            convs=tuple(tuple(int(v) for v in row) for row in data["convs"]),
            dense=int(data["dense"]),
            vbn=bool(data["vbn"]),
            vbn_eps=float(data["vbn_eps"]),
        )
    return PolicySpec(
        kind=str(data["kind"]),
        obs_dim=int(data["obs_dim"]),
        act_dim=int(data["act_dim"]),
        discrete=bool(data["discrete"]),
        hidden=tuple(int(h) for h in data["hidden"]),
        activation=str(data["activation"]),
        action_low=tuple(float(v) for v in data["action_low"]),
        action_high=tuple(float(v) for v in data["action_high"]),
    )


def load_policy(path: Path) -> SavedPolicy:
    with np.load(path, allow_pickle=False) as data:
        norm = ObsNorm(data["obs_mean"].copy(), data["obs_std"].copy(), float(data["obs_clip"]))
        reference = data["vbn_reference"].copy() if "vbn_reference" in data.files else None
        return SavedPolicy(_spec_from(data), data["params"].copy(), norm, str(data["env_id"]),
                           int(data["generation"]), reference)


class CheckpointError(Exception):
    """No usable checkpoint: the message says which folder and why."""


@dataclass
class TrainingState:
    """Everything that determines the rest of a run (the config aside)."""

    generation: int
    timesteps: int
    elapsed_s: float  # running seconds of every session so far, pauses left out
    strategy: dict[str, np.ndarray]  # the strategy's state(); "theta" is its mean
    obs_sum: np.ndarray
    obs_sumsq: np.ndarray
    obs_count: int
    mean_episode_length: float = 0.0  # the last generation's, for es.episode_cap
    best_return: float | None = None  # policy_best.npz's confirmed score (None: none kept)
    best_generation: int | None = None  # and the generation it comes from
    confirm_steps: int = 0  # env steps the confirmations of kept policies have played
    nominations: list[Nomination] = field(default_factory=list)  # waiting for confirmation
    # The last generation's progress row, written once its evaluation is played (beside the
    # next generation's members): a resumed run writes it then, as one that never stopped.
    held_row: dict[str, Any] | None = None
    paused_s: float = 0.0  # seconds the run's processes stood stopped (SIGSTOP), all sessions
    probe: str | None = None  # a user's policy: UserPolicy.probe_digest() (None: a built-in)


CHECKPOINT_FORMAT = 2
#: Format 1 held OpenAI-ES's state (theta, optimizer_*) under the same names: still readable.
READABLE_FORMATS = (1, 2)
OBS_ARRAYS = ("obs_sum", "obs_sumsq")
NOMINATION_ARRAYS = ("nomination_params", "nomination_obs_mean", "nomination_obs_std",
                     "nomination_returns")


def _nomination_arrays(nominations: list[Nomination]) -> dict[str, np.ndarray]:
    """The waiting nominations' parameters, normalisations and confirmation returns, as
    arrays (none if nothing waits); their scalars go into the JSON."""
    if not nominations:
        return {}
    return {
        "nomination_params": np.stack([n.params for n in nominations]),
        "nomination_obs_mean": np.stack([n.norm.mean for n in nominations]),
        "nomination_obs_std": np.stack([n.norm.std for n in nominations]),
        "nomination_returns": np.array([r for n in nominations for r in n.returns],
                                       dtype=np.float64),
    }


def _nominations_from(data: Any, fields: list[dict]) -> list[Nomination]:
    nominations, start = [], 0
    for i, item in enumerate(fields):
        played = int(item["played"])
        norm = ObsNorm(data["nomination_obs_mean"][i].copy(), data["nomination_obs_std"][i].copy(),
                       float(item["obs_clip"]))
        nominations.append(Nomination(
            int(item["generation"]), float(item["score"]), data["nomination_params"][i].copy(),
            norm, [float(r) for r in data["nomination_returns"][start:start + played]]))
        start += played
    return nominations


def _checkpoint_stem(generation: int) -> str:
    return f"ckpt-{generation:08d}"


def save_checkpoint(folder: Path, state: TrainingState, config: dict, keep: int) -> Path:
    """Write ``ckpt-GGGGGGGG.npz`` then its ``.json`` (with the npz's sha256); keep the last K.

    The JSON is written last, so a checkpoint without its JSON never counts as written.
    """
    folder.mkdir(parents=True, exist_ok=True)
    stem = _checkpoint_stem(state.generation)
    arrays = {name: np.asarray(value) for name, value in state.strategy.items()}
    arrays |= {"obs_sum": state.obs_sum, "obs_sumsq": state.obs_sumsq}
    arrays |= _nomination_arrays(state.nominations)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    payload = buffer.getvalue()
    write_atomically(folder / f"{stem}.npz", lambda handle: handle.write(payload))
    meta = {
        "format": CHECKPOINT_FORMAT,
        "generation": state.generation,
        "timesteps": state.timesteps,
        "elapsed_s": state.elapsed_s,
        "paused_s": state.paused_s,
        "obs_count": state.obs_count,
        "mean_episode_length": state.mean_episode_length,
        "best_return": state.best_return,
        "best_generation": state.best_generation,
        "confirm_steps": state.confirm_steps,
        "held_row": state.held_row,
        "probe": state.probe,
        "nominations": [{"generation": n.generation, "score": n.score, "played": len(n.returns),
                         "obs_clip": n.norm.clip} for n in state.nominations],
        "sha256": hashlib.sha256(payload).hexdigest(),
        "config": config,
    }
    meta["meta_sha256"] = _meta_digest(meta)
    text = json.dumps(meta, indent=1).encode()
    write_atomically(folder / f"{stem}.json", lambda handle: handle.write(text))
    for old in sorted(folder.glob("ckpt-*.json"))[:-keep]:
        old.unlink(missing_ok=True)
        old.with_suffix(".npz").unlink(missing_ok=True)
    return folder / f"{stem}.json"


def read_checkpoint(meta_path: Path) -> tuple[TrainingState, dict]:
    """One checkpoint (its ``.json``; the ``.npz`` beside it) and its config."""
    try:
        meta = json.loads(meta_path.read_text())
        payload = meta_path.with_suffix(".npz").read_bytes()
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{meta_path.name}: unreadable ({error})") from None
    if not isinstance(meta, dict) or meta.get("format") not in READABLE_FORMATS:
        raise CheckpointError(f"{meta_path.name}: not a checkpoint of format "
                              f"{' or '.join(map(str, READABLE_FORMATS))}")
    # The JSON's own fields too (generation, steps, the config): an edit there resumed
    # without a word, with other steps and rows. Checkpoints from before the field have none.
    if ("meta_sha256" in meta and _meta_digest(meta) != meta["meta_sha256"]) \
            or meta.get("generation") != _generation_of(meta_path):
        raise CheckpointError(f"{meta_path.name}: checksum mismatch")
    if hashlib.sha256(payload).hexdigest() != meta.get("sha256"):
        raise CheckpointError(f"{meta_path.with_suffix('.npz').name}: checksum mismatch")
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as data:
            strategy = {key: data[key].copy() for key in data.files
                        if key not in OBS_ARRAYS + NOMINATION_ARRAYS}
            if "theta" not in strategy:
                raise KeyError("theta")
            state = TrainingState(
                generation=int(meta["generation"]),
                timesteps=int(meta["timesteps"]),
                elapsed_s=float(meta["elapsed_s"]),
                paused_s=float(meta.get("paused_s", 0.0)),
                strategy=strategy,
                obs_sum=data["obs_sum"].copy(),
                obs_sumsq=data["obs_sumsq"].copy(),
                obs_count=int(meta["obs_count"]),
                mean_episode_length=float(meta.get("mean_episode_length", 0.0)),
                best_return=_optional(meta.get("best_return"), float),
                best_generation=_optional(meta.get("best_generation"), int),
                confirm_steps=int(meta.get("confirm_steps", 0)),
                nominations=_nominations_from(data, meta.get("nominations", [])),
                held_row=meta.get("held_row"),
                probe=meta.get("probe"),
            )
    except (KeyError, TypeError, ValueError, OSError) as error:
        raise CheckpointError(f"{meta_path.name}: incomplete ({error})") from None
    return state, meta["config"]


def _meta_digest(meta: dict) -> str:
    """sha256 of a checkpoint's JSON fields but this one, in a canonical form (sorted keys;
    Python writes a float as the text that reads back as it)."""
    fields = {key: value for key, value in meta.items() if key != "meta_sha256"}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def _generation_of(meta_path: Path) -> int | None:
    """The generation a checkpoint's file name says (``ckpt-00000015.json``: 15)."""
    digits = meta_path.stem.removeprefix("ckpt-")
    return int(digits) if digits.isdigit() else None


def _optional(value: Any, kind: Callable[[Any], Any]) -> Any:
    """A JSON field that may be null (or absent: checkpoints written before it existed)."""
    return None if value is None else kind(value)


def has_checkpoint(run_dir: str | Path) -> bool:
    """Whether a run folder holds a checkpoint (intact or not): a run to resume."""
    return any((Path(run_dir) / "checkpoints").glob("ckpt-*.json"))


def load_latest_checkpoint(folder: Path) -> tuple[TrainingState, dict, list[str]]:
    """The newest intact checkpoint, its config, and a warning for each newer bad one."""
    warnings: list[str] = []
    for meta_path in sorted(folder.glob("ckpt-*.json"), reverse=True):
        try:
            state, config = read_checkpoint(meta_path)
        except CheckpointError as error:
            warnings.append(f"skipping bad checkpoint {error}")
            continue
        return state, config, warnings
    reason = "; ".join(warnings) if warnings else "none written yet"
    raise CheckpointError(f"no intact checkpoint in {str(folder)!r} ({reason})")
