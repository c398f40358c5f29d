"""``es.train``: reinforcement-learning training from Python, the same run ``es-train`` makes.

>>> import es                                                    # doctest: +SKIP
>>> run = es.train("configs/cartpole.toml", overrides={"es.sigma": 0.05}, run_dir="runs/nb")
>>> run.eval_return, run.run_dir, run.history[-1]["timesteps"]   # doctest: +SKIP
>>> action = run.policy(observation)                             # doctest: +SKIP

Under ``mpiexec`` every rank calls ``es.train`` and they train together, as ``es-train`` does.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import functools
import os
import shlex
import signal
import socket
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from es.config import (
    Config,
    ConfigError,
    from_dict,
    ignored_settings,
    locate_config,
    read_toml,
)
from es.core.messages import callback_error
from es.parallel.comm import Comm, disagreement, make_comm, refused_together
from es.rl.checkpoint import SavedPolicy, load_policy
from es.rl.policy import Policy, is_instance, object_path


@dataclass
class TrainingRun:
    """A finished run: the mean policy (callable on one observation), its history and folder;
    ``best``, the kept policy (``policy_best.npz``: the best evaluation, confirmed on
    ``run.best_episodes`` fresh episodes; None if none was kept), ``best.act(env)`` plays it."""

    run_dir: Path
    policy: Callable[[np.ndarray], Any]
    saved: SavedPolicy
    history: list[dict[str, int | float | None]]
    generations: int
    timesteps: int
    eval_return: float | None
    best: SavedPolicy | None
    best_return: float | None
    # What ended it: the setting whose budget it spent ("run.max_seconds = 60"), the target
    # its kept policy reached ("run.target_score = 450"), or "the callback".
    ended_by: str

    def make_env(self, render_mode: str | None = None) -> Any:
        """The run's environment as training built it from ``config.toml`` (env.kwargs, an
        Atari game's preprocessing: the 84 x 84 frames its policy takes), whose observations
        ``policy`` acts on; ``render_mode="rgb_array"`` to film it."""
        from es.config import load_config
        from es.rl.envs import env_from_config

        return env_from_config(load_config(self.run_dir / "config.toml"), render_mode)

    def __repr__(self) -> str:
        """A summary: the generated repr printed every history row and the policies'
        parameters (a notebook cell's worth of numbers for a long run)."""
        best = ("None" if self.best is None else
                f"generation {self.best.generation}, return {self.best_return}")
        return (f"TrainingRun(run_dir={str(self.run_dir)!r}, env={self.saved.env_id!r}, "
                f"generations={self.generations}, timesteps={self.timesteps}, "
                f"eval_return={self.eval_return}, best: {best}, "
                f"ended_by={self.ended_by!r}, history: {len(self.history)} rows)")


def _with_overrides(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``{"es.sigma": 0.05}`` into the nested config tables."""
    for dotted, value in overrides.items():
        if not isinstance(dotted, str):
            raise ConfigError(f"override key {dotted!r}: must be a dotted 'section.key' "
                              "string, e.g. 'es.sigma'")
        *sections, key = dotted.split(".")
        if not sections:
            raise ConfigError(f"override {dotted!r}: expected section.key, e.g. 'es.sigma'")
        node = data
        for section in sections:
            node = node.setdefault(section, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {dotted!r}: {section} is not a table")
        node[key] = plain(value)
    return data


def resolve_config(config: str | Path | Config | dict[str, Any],
                   overrides: dict[str, Any] | None, policy: Any = None) -> Config:
    """A config file (its stem names the run), a ``Config`` or a dict of its tables, with
    overrides applied (NumPy numbers as Python's); with
    a ``policy`` from Python, ``policy.kind`` names it (``module:name``)."""
    if isinstance(config, Config):
        data = config.to_dict()
    elif isinstance(config, dict):
        data = plain(copy.deepcopy(config))
    elif isinstance(config, str | Path):
        data = read_toml(locate_config(config))
        data.setdefault("run", {}).setdefault("name", Path(config).stem)
    else:
        raise ConfigError(f"config {config!r}: must be a config file's path, a Config or a "
                          "dict of its tables ({'env': {'id': 'CartPole-v1'}, ...})")
    if overrides is not None and not isinstance(overrides, dict):
        raise ConfigError(f"overrides {overrides!r}: must be a dict of dotted keys, "
                          "{'es.sigma': 0.05} (es-train's --set es.sigma=0.05)")
    if isinstance(policy, str):
        raise ConfigError(f"policy {policy!r}: a name is policy.kind's value, "
                          f"overrides={{'policy.kind': {policy!r}}}; policy= takes a factory, "
                          "a class or an instance")
    if policy is not None and not callable(policy) and not isinstance(policy, Policy):
        raise ConfigError(f"policy={policy!r:.60} is not a policy (type "
                          f"{type(policy).__name__}); policy= takes a factory or class "
                          "(called with the observation and action spaces), a "
                          "torch.nn.Module or an object with num_params, initial_params(rng) "
                          "and act(params, observation, state)")
    if policy is not None:
        data.setdefault("policy", {})["kind"] = object_path(policy)
        kind = (overrides or {}).get("policy.kind", data["policy"]["kind"])
        if kind != data["policy"]["kind"]:  # the run would train one and record the other
            raise ConfigError(f"policy.kind = {kind!r} and policy={policy!r}: give one of "
                              "them (policy= trains that object and names it policy.kind)")
    return from_dict(_with_overrides(data, dict(overrides or {})))


def plain(value: Any) -> Any:
    """NumPy numbers (``np.int64(2)``, from ``np.arange`` in a sweep) and paths as the
    Python numbers and strings a config file gives, in lists and tables too."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value


def _history(run_dir: Path) -> list[dict[str, int | float | None]]:
    """``progress.csv``'s rows typed as the callback's rows are: counts as ints."""
    from es.rl.metrics import COUNT_COLUMNS

    with (run_dir / "progress.csv").open() as handle:
        return [{key: None if not value else int(value) if key in COUNT_COLUMNS
                 else float(value) for key, value in row.items()}
                for row in csv.DictReader(handle)]


@contextlib.contextmanager
def torch_threads_kept() -> Iterator[None]:
    """torch's thread count as the caller set it, back after the call (``es.train`` and
    ``es.resume`` run in it): a torch policy runs on one thread (``TorchPolicy``, from
    the config's first check on), as BLAS does under ``threadpool_limits``. A torch first
    loaded by the call keeps the one: its own default was never read."""
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    try:
        yield
    finally:
        if threads is not None:
            torch.set_num_threads(threads)


def train(
    config: str | Path | Config | dict[str, Any],
    overrides: dict[str, Any] | None = None,
    *,
    run_dir: str | Path | None = None,
    force: bool = False,
    quiet: bool = True,
    comm: Comm | None = None,
    callback: Callable[[dict[str, Any]], object] | None = None,
    policy: Any = None,
) -> TrainingRun:
    """Train as ``es-train CONFIG --set KEY=VALUE ... --run-dir RUN_DIR`` would, and return
    the run. ``config`` is a file's path or, from any folder, a shipped config's name
    (``"cartpole"``, ``"configs/cartpole.toml"``), a ``Config`` or a dict of its tables.
    Errors in the config raise ``ConfigError`` (a ``ValueError``) before anything
    starts; an existing run folder is refused unless ``force``. BLAS (and torch, for a
    torch policy) runs on one thread during the call (restored after), as under ``es-train``.

    ``callback(row)`` is called after every generation with its ``progress.csv`` row (a dict:
    ``generation``, ``timesteps``, ``return_mean``, ``eval_return``, ...; None where the
    file's cell is empty). Returning ``False`` stops the run there, checkpointed, as a budget
    would (any other value goes on). Under ``mpiexec`` rank 0's callback decides and every
    rank stops with it.

    ``policy``: your own policy instead of ``policy.kind``'s: a factory or class called with
    the observation and action spaces (and ``policy.kwargs``), or an instance; a
    ``torch.nn.Module`` or an object of the policy protocol (``es.rl.policy``). The run's
    ``config.toml`` names it as ``module:name`` (an instance: its class, called with the
    spaces), so es-eval and ``--resume`` can rebuild it where that module is importable (not
    for one defined in a notebook or ``__main__``).
    ``run.policy`` acts for one episode; a recurrent policy's next episode wants a fresh one,
    ``run.saved.act(env)``."""
    from es.rl.runs import check_run_dir, configure_logging

    with torch_threads_kept():  # no frame of its own: the warnings' stacklevel holds
        comm = comm or make_comm()
        with refused_together(comm, "es.train", ConfigError):
            _check_callback(callback)
            _check_flag("force", force)  # "no" would be true, and overwrite a run
            _check_flag("quiet", quiet)  # "no" was taken as true, and the run printed nothing
            if run_dir is not None and not _is_path(run_dir):
                raise ConfigError(f"run_dir {run_dir!r}: must be a folder's path (str or Path) "
                                  "or None")
            resolved = resolve_config(config, overrides, policy)
            _check_runnable(resolved)
        _check_ranks_agree(comm, resolved, run_dir, force)
        configure_logging(comm.rank == 0 and not quiet)
        checked = check_run_dir(None if run_dir is None else str(run_dir), resolved, force,
                                overwrite="choose another run_dir or pass force=True to "
                                          "overwrite it",
                                resume=lambda folder: f"es.resume({str(folder)!r})"
                                ) if comm.rank == 0 else None
        folder, error = comm.broadcast(checked)
        if error:
            raise ConfigError(error)
        return _train_in(folder, resolved, None, comm, callback, policy)


def _check_ranks_agree(comm: Comm, config: Config, run_dir: Any, force: bool) -> None:
    """Under ``mpiexec`` every rank must be given the same config: ranks with an override
    that depends on the rank (``run.generations``) trained apart and then waited for each
    other for good, and SIGTERM, which ends a run at its generation's end, could not end
    it. And the same ``run_dir`` and ``force``, which rank 0's replaced unsaid."""
    settings = {f"{section}.{key}": repr(value)
                for section, values in config.to_dict().items()
                for key, value in values.items()}
    differing = disagreement(comm, settings | {"run_dir": _spelled(run_dir),
                                               "force": str(force)})
    if differing:
        raise ConfigError(f"es.train under mpiexec: the ranks were given different "
                          f"{differing}; every rank must be given the same config, "
                          "overrides, run_dir and force")


def _spelled(run_dir: Any) -> str:
    """The folder as the ranks compare it: ``runs/x``, ``./runs/x`` and ``Path("runs/x/")``
    are one folder (relative, not resolved: hosts may start the ranks in other folders)."""
    return os.path.normpath(run_dir) if _is_path(run_dir) else repr(run_dir)


def _is_path(value: Any) -> bool:
    """A folder's path: a Path, or a str that is not empty (an unset variable's "", which
    Path("") would take for the current folder)."""
    return isinstance(value, Path) or isinstance(value, str) and bool(value.strip())


def _warn_if_rebuilt_apart(trainer: Any, instance: Any) -> None:
    """An instance is recorded as its class: warn at the start, not after training, when
    es-eval and --resume would silently rebuild another policy from that record."""
    problem = trainer.policy.rebuilt_apart(instance, trainer.env, trainer.strategy.mean)
    if problem is None:
        return
    warnings.warn(
        f"policy: this run's config.toml names the instance's class, "
        f"{trainer.config.policy.kind!r}, and es-eval and es-train --resume would call it "
        f"with the two spaces, which {problem}. To evaluate or resume the run from its folder, "
        "give es.train a factory instead (a function of the two spaces, or the class with its "
        "arguments in policy.kwargs), or pass the instance again: es.resume(RUN, policy=...)",
        stacklevel=4)


def resume(run_dir: str | Path, overrides: dict[str, Any] | None = None, *, quiet: bool = True,
           comm: Comm | None = None, callback: Callable[[dict[str, Any]], object] | None = None,
           policy: Any = None) -> TrainingRun:
    """Continue a stopped run from its newest intact checkpoint, as ``es-train --resume
    RUN_DIR`` does, with the same bits as an unstopped run (on any rank count); a run stopped
    before its first checkpoint starts over from its ``config.toml``. ``overrides`` may change
    only the budgets (``es.rl.resume.RESUME_OVERRIDES``: ``{"run.generations": 400}``).
    ``policy``: the factory, class or instance the run was trained with, needed where
    ``policy.kind`` names one that cannot be imported (defined in a notebook or
    ``__main__``). What the checkpoint says (an older checkpoint used, a hand-edited
    ``config.toml``) comes as ``UserWarning``s."""
    from es.rl.resume import claim, load_resume
    from es.rl.runs import check_run_dir, configure_logging, release_run_dir

    with torch_threads_kept():  # no frame of its own: the warnings' stacklevel holds
        comm = comm or make_comm()
        with refused_together(comm, "es.resume", ConfigError):
            _check_callback(callback)
            _check_flag("quiet", quiet)
            if not _is_path(run_dir):
                raise ConfigError(f"run_dir {run_dir!r}: must be a run folder's path (str or "
                                  "Path)")
            if overrides is not None and not isinstance(overrides, dict):
                raise ConfigError(f"overrides {overrides!r}: must be a dict of dotted keys, "
                                  "{'run.generations': 400}")
        # Rank 0 alone reads the folder with its overrides: the others' must be the same.
        differing = disagreement(comm, {"run_dir": _spelled(run_dir), **{
            str(key): repr(value) for key, value in (overrides or {}).items()}})
        if differing:
            raise ConfigError(f"es.resume under mpiexec: the ranks were given different "
                              f"{differing}; every rank must be given the same run_dir and "
                              "overrides")
        configure_logging(comm.rank == 0 and not quiet)
        prepared: Any = None
        if comm.rank == 0:
            try:
                claim(run_dir)
                config, state, said = load_resume(str(run_dir), plain(dict(overrides or {})),
                                                  "es.resume")
                _check_runnable(config)
                if policy is not None and object_path(policy) != config.policy.kind:
                    raise ConfigError(f"policy={policy!r}: the run was trained with policy.kind = "
                                      f"{config.policy.kind!r}; pass that one")
                folder = str(run_dir)
                if state is None:  # no checkpoint yet: a start in the same folder
                    folder, error = check_run_dir(folder, config, True)
                    if error:
                        raise ConfigError(error)
                prepared = config, state, said, folder, None
            except (ConfigError, ValueError, OSError) as error:  # said on every rank
                prepared = None, None, [], None, str(error)
        config, state, said, folder, error = comm.broadcast(prepared)
        if error:
            if comm.rank == 0:
                release_run_dir(run_dir)
            raise ConfigError(error)
        for line in said if comm.rank == 0 else ():
            warnings.warn(line, stacklevel=2)
        return _train_in(folder, config, state, comm, callback, policy)


def _check_callback(callback: object) -> None:
    if problem := callback_error(callback, "a progress row"):  # else after generation 1
        raise ValueError(problem)


def _check_flag(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} {value!r}: must be True or False")


def _check_runnable(config: Config) -> None:
    """What a run needs before anything starts: its env importable and known, and the
    TensorBoard extra when it writes event files."""
    from es.rl.envs import check_env_id
    from es.rl.tensorboard_log import require_tensorboard

    check_env_id(config.env.id)
    if config.run.tensorboard:
        require_tensorboard()


def _train_in(folder: str, config: Config, state: Any, comm: Comm,
              callback: Callable[[dict[str, Any]], object] | None, policy: Any) -> TrainingRun:
    """The run of ``es.train`` (``state`` None: a start) or ``es.resume`` (a checkpoint's
    state) in ``folder``, which rank 0 holds from here to the end."""
    from es.parallel.heartbeat import peer_lost
    from es.rl.resume import after_lost
    from es.rl.runs import release_run_dir, start_run_dir
    from es.rl.trainer import SecondSignal, StopFlag, Stopped, Trainer

    # One BLAS thread, as es-train pins it: the parallelism is the ranks'. NumPy is loaded
    # already (a notebook), so environment variables such as the es-*
    # programs set would be too late.
    # The trainer is closed after the run: its shared noise table is an MPI window.
    ranks = comm.allgather_objects(f"{os.getpid()}@{socket.gethostname()}")
    resume = f"es.resume({folder!r}) or es-train --resume {shlex.quote(folder)}"
    # Said at once on rank 0, quiet or not: a generation may take a minute, and an interrupt
    # that seemed unheard was pressed again, losing the generation.
    stop_flag = StopFlag(announce="es.train: {signal}: stopping after the generation in "
                         "progress, with its checkpoint (a second signal 2 s later stops at "
                         "once, that generation lost)" if comm.rank == 0 else None)
    handlers = stop_flag.install_over_defaults()
    try:
        with threadpool_limits(limits=1), Trainer(config, comm, Path(folder),
                                                  stop_flag=stop_flag, policy=policy
                                                  ) as trainer:
            if state is not None:
                trainer.restore(state)
            else:  # the folder is written once the run's environment and policy are built
                error = comm.broadcast(start_run_dir(folder, config) if comm.rank == 0
                                       else None)
                if error:
                    raise ConfigError(error)
                for line in ignored_settings(config) if comm.rank == 0 else ():
                    warnings.warn(line, stacklevel=3)  # as es-train says them
                if comm.rank == 0 and policy is not None and is_instance(policy):
                    _warn_if_rebuilt_apart(trainer, policy)
            # Under mpiexec, a rank that stops answering ends the job as in es-train, where
            # the others would wait for it in the next exchange for good.
            then = functools.partial(after_lost, folder, resume)
            with comm.heartbeat(ranks, config.run.peer_timeout_s,
                                lambda line: peer_lost(line, comm, then, "es.train"),
                                lambda: f"generation {trainer.strategy.generation + 1}"):
                result = trainer.run(callback)
    except Stopped as stop:  # after the generation in progress, checkpointed, as es-train
        said = f"{stop}; its checkpoint is saved: {resume} continues the run"
        if stop.signum == signal.SIGINT:  # Ctrl-C, a notebook's interrupt: as Python's own
            raise KeyboardInterrupt(said) from None
        raise Stopped(stop.signum, stop.generation, said) from None
    except SecondSignal:
        from es.rl.checkpoint import has_checkpoint

        then = (f"{resume} continues the run from its newest checkpoint"
                if has_checkpoint(folder) else f"no checkpoint was written yet: {resume} "
                "starts it over")
        raise KeyboardInterrupt(
            "es.train stopped at once by a second signal: what was in progress (a generation, "
            f"or the stop's confirmation of the kept policy) is lost; {then}") from None
    finally:
        StopFlag.restore(handlers)
        release_run_dir(folder)  # held since start_run_dir: the next es.train may use it
    comm.barrier()  # rank 0's files are complete before any rank reads them
    saved = load_policy(Path(folder) / "policy.npz")
    act = saved.act(trainer.env, policy)
    best = load_policy(Path(folder) / "policy_best.npz") if result.best_return is not None \
        else None
    return TrainingRun(Path(folder), act, saved, _history(Path(folder)), result.generations,
                       result.timesteps, result.eval_return, best, result.best_return,
                       result.ended_by)
