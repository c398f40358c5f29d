"""Any command line of any ``es-*`` program ends in exit 0, exit 2 with one line on stderr, or
the documented 1 (a failed run), 75 (stopped by SIGTERM/SIGUSR1/2, checkpointed), 130 or
143 (interrupted); never in a traceback.

Hypothesis builds each argv from the program's real flags and sub-commands, mixed with hostile
values (empty, '-', NaN, infinities, huge integers, line breaks, undecodable bytes, folders,
missing files, files that are not TOML or npz) and with real configs and a real tiny run.
Valid command lines must stay cheap: flags that set a budget (generations, episodes, repeats,
ranks, seconds) draw only from small or invalid values, and es-train/es-baseline get tiny
budgets appended after the drawn ``--set`` overrides (the last one wins).

es-train, es-eval, es-plot and es-baseline run in-process through their ``main(argv)`` (an
exception escaping it is what the console script would print as a traceback), with stdout
and stderr encoded as a real process's are here. es-bench and es-compare launch runs under
mpiexec and in subprocesses: they run as subprocesses themselves, with a timeout.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import signal
import tempfile
import traceback
from pathlib import Path

import pytest
from conftest import REPO, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from es.cli import baseline, bench, compare, evaluate, plot, train
from es.config import SECTIONS

ALLOWED_CODES = {0, 1, 2, 75, 130, 143}
IN_PROCESS = {"es-train": train.main, "es-eval": evaluate.main, "es-plot": plot.main,
              "es-baseline": baseline.main, "es-bench": bench.main,
              "es-compare": compare.main}

# Placeholders, made real per example in a fresh folder (see ``resolve``).
PLACES = ["CONFIG", "RUN", "DIR", "MISSING", "TEXTFILE", "NPZ", "BADNPZ", "CONFIGDIR"]
HOSTILE = ["", "-", "--", "nan", "inf", "-inf", "-1", "0", "1", "99999999999999999999",
           "1e400", "x\ny", "\udcff", "é\u2028", "a b", "true", "[1]", "{}", "=", ".", *PLACES]
hostile = st.sampled_from(HOSTILE)


def mixed(*valid: str) -> st.SearchStrategy:
    """Two valid values for each hostile one."""
    return st.one_of(st.sampled_from(valid), st.sampled_from(valid), hostile)


def small(*valid: str) -> st.SearchStrategy:
    """Values of a flag that sets a budget: small valid ones or invalid ones, never huge."""
    return st.sampled_from([*valid, "", "-", "nan", "inf", "-1", "0", "x"])


KEYS = [f"{section}.{name}" for section, cls in SECTIONS.items()
        for name in cls.__dataclass_fields__]
BOGUS_KEYS = ["es", "es.", ".x", "nosuch.key", "es.sigma.x", "env.kwargs.bogus", "run.zzz"]
override = st.one_of(
    st.builds(lambda key, value: f"{key}={value}", st.sampled_from(KEYS + BOGUS_KEYS),
              mixed("1", "2", "0.5", "true", "false", "[4]", "{}", '"static"')),
    hostile,
)


def flag(name: str, values: st.SearchStrategy = hostile) -> st.SearchStrategy:
    return st.tuples(st.just(name), values).map(list)


def switch(name: str) -> st.SearchStrategy:
    return st.just([name])


def command_line(*required: st.SearchStrategy, options: tuple = (), most: int = 4,
                 junk: bool = True) -> st.SearchStrategy:
    """Required arguments (each drawn, mostly valid), then any options in any order, and
    now and then a stray hostile token."""
    tokens = [*options, hostile.map(lambda p: [p])] if junk else list(options)
    return st.tuples(st.tuples(*required), st.lists(st.one_of(*tokens), max_size=most)).map(
        lambda t: [*(token for part in t[0] for token in ([part] if isinstance(part, str)
                                                            else part)),
                   *(token for part in t[1] for token in part)])


# Tiny budgets, appended last so that they win over any drawn value of the same key.
TRAIN_BUDGET = ["run.generations=1", "es.population=4", "run.eval_episodes=1",
                "es.noise_table_size=10000", "env.max_episode_steps=50"]
BASELINE_BUDGET = ["run.generations=1", "run.eval_episodes=1", "env.max_episode_steps=50",
                   "dqn.steps_per_round=64", "dqn.learning_starts=32", "dqn.train_every=32",
                   "dqn.gradient_steps=2", "dqn.buffer_size=256", "dqn.batch_size=16",
                   "dqn.epsilon_decay_steps=64", "dqn.target_update_every=64",
                   "pg.episodes_per_update=2"]


def _budget(argv: list[str]) -> list[str]:
    if "--resume" in argv:  # a resumed run keeps its (tiny) config: only this may change
        return [*argv, "--set", "run.generations=2"]
    return [*argv, *(token for kv in TRAIN_BUDGET for token in ("--set", kv))]


train_argv = command_line(
    mixed("CONFIG", "TINY"),
    options=(flag("--set", override), flag("--set", override),
             flag("--seeds", small("0", "0,1", "1-2", "2-1", "0,0")),
             flag("--run-dir", mixed("out", "DIR", "RUN")), switch("--force"), switch("--quiet"),
             flag("--resume", mixed("RUN"))),
).map(_budget)
eval_argv = command_line(
    mixed("RUN", "RUN", "BADRUN"),
    options=(flag("--episodes", small("1", "2")), flag("--seed", mixed("0", "7")),
             flag("--video", mixed("v.gif", "v.txt", "DIR/v.gif")),
             flag("--video-steps", small("1", "5")), switch("--random")),
)
figure = mixed("p.png", "p.svg", "p.txt", "DIR", "DIR.png")
plot_argv = command_line(
    mixed("RUN", "RUN"), st.one_of(flag("-o", figure), flag("--figure", figure)),
    options=(flag("--x", mixed("timesteps", "time_s")),
             flag("--y", mixed("eval_return", "return_max")), flag("--title"),
             switch("--log-x"), st.just(["RUN"])),
)
baseline_argv = command_line(
    mixed("dqn", "pg", "gorila"), mixed("BASELINE_DQN", "BASELINE_PG"),
    options=(flag("--set", override), flag("--run-dir", mixed("out", "DIR")), switch("--force"),
             switch("--quiet")),
).map(lambda argv: [*argv, *(token for kv in BASELINE_BUDGET for token in ("--set", kv))])
bench_argv = st.one_of(
    command_line(options=(
        flag("--env", mixed("CartPole-v1")), flag("--synthetic-step-ms", small("0.01")),
        flag("--lengths", mixed("fixed", "pareto")), flag("--mode", mixed("weak", "strong")),
        flag("--mean-length", small("1", "2")), flag("--max-length", small("2", "3")),
        flag("--min-sleep-ms", small("0", "1")), flag("--ranks", small("1", "1,2")),
        flag("--schedule", mixed("static", "dynamic")), flag("--members-per-rank", small("2")),
        flag("--population", small("2", "4")), flag("--generations", small("5")),
        flag("--repeats", small("1")), flag("--config", mixed("CONFIG", "TEXTFILE")),
        flag("--policy-kind", mixed("linear", "cnn")), flag("--table-size", small("10000")),
        flag("--out", mixed("out")), flag("--launcher", st.sampled_from(['"', "MISSING"]))),
        most=3).map(lambda a: ["scaling", "--env", "CartPole-v1", "--ranks", "1",
                               "--repeats", "1", "--generations", "5",
                               "--members-per-rank", "2", "--out", "out", *a]),
    command_line(options=(flag("--params", small("10", "1e1")),
                          flag("--populations", small("4", "3")),
                          flag("--ranks", small("1", "1,2")), flag("--repeats", small("1")),
                          flag("--out", mixed("out"))), most=3).map(
        lambda a: ["comm", "--params", "10", "--populations", "4", "--repeats", "1",
                   "--ranks", "1", "--out", "out", *a]),
    command_line(options=(flag("--params", small("10")), flag("--populations", small("4")),
                          flag("--out", mixed("out")), flag("--repeats", small("1"))),
                 junk=False).map(lambda a: ["comm-worker", "--params", "10", "--populations",
                                            "4", "--repeats", "1", *a]),
    command_line(options=(switch("--help"),), most=2),
)
compare_argv = command_line(
    options=(flag("--env", mixed("CartPole-v1", "Pendulum-v1")),
             flag("--methods", mixed("es", "dqn", "es,es", "dqn,dqn", "es,")),
             flag("--method-config", mixed("es=MISSING", "es=DIR", "x=y", "=", "es")),
             flag("--threshold", mixed("100", "-5")), flag("--out", mixed("out2")),
             flag("--budget-s", small("1")), flag("--seeds", small("0", "3-1")),
             flag("--ranks", small("1", "1,2")), flag("--jobs", small("1")),
             flag("--eval-episodes", small("1"))), most=3,
).map(lambda a: ["--env", "CartPole-v1", "--budget-s", "1", "--seeds", "0", "--eval-episodes",
                 "1", "--methods", "es", "--method-config", "es=TINY", "--out", "out", *a])


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A real tiny run, a tiny ES config, and the baseline configs, made once."""
    root = tmp_path_factory.mktemp("fuzz")
    tiny = root / "tiny.toml"
    tiny.write_text((REPO / "configs/cartpole.toml").read_text().replace(
        "population = 16", "population = 4").replace("noise_table_size = 1_000_000",
                                                     "noise_table_size = 10_000"))
    code, _, err = invoke("es-train", [str(tiny), "--run-dir", str(root / "run"), "--quiet",
                                       "--set", "run.generations=1"], root)
    assert code == 0, err
    return root


def resolve(token: str, world: Path, here: Path) -> str:
    """A placeholder as a real path in this example's folder ``here``."""
    made = {
        "CONFIG": lambda: REPO / "configs/cartpole.toml",
        "CONFIGDIR": lambda: REPO / "configs",
        "BASELINE_DQN": lambda: REPO / "configs/baselines/cartpole_dqn.toml",
        "BASELINE_PG": lambda: REPO / "configs/baselines/cartpole_pg.toml",
        "TINY": lambda: world / "tiny.toml",
        "DIR": lambda: here,
        "MISSING": lambda: here / "missing",
        "TEXTFILE": lambda: _file(here / "text.toml", "this is [not toml\n"),
        "RUN": lambda: _copy_run(world, here),
        "NPZ": lambda: _copy_run(world, here) / "policy.npz",
        "BADNPZ": lambda: _file(_copy_run(world, here) / "policy.npz", "not a zip"),
        "BADRUN": lambda: _file(_copy_run(world, here) / "policy.npz", "not a zip").parent,
    }
    for name, make in sorted(made.items(), key=lambda item: -len(item[0])):  # BADRUN: not RUN
        if name in token:
            return token.replace(name, str(make()))
    return token


def _file(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _copy_run(world: Path, here: Path) -> Path:
    run = here / "run"
    if not run.exists():
        shutil.copytree(world / "run", run)
    return run


def invoke(program: str, argv: list[str], cwd: Path) -> tuple[int, str, str]:
    """``program``'s main(argv) as its console script runs it: (exit code, stdout, stderr)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    logger = logging.getLogger("es")
    log_state = (logger.handlers[:], logger.level)
    before = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = IN_PROCESS[program](argv)
            except SystemExit as stop:
                code = stop.code
            except Exception:
                pytest.fail(f"{program} {argv!r} raised:\n{traceback.format_exc()}")
    finally:
        os.chdir(before)
        for number, handler in handlers.items():
            signal.signal(number, handler)
        logger.handlers[:], logger.level = log_state
    if isinstance(code, str):  # sys.exit("message"): printed, exit 1
        code = 1
    texts = []
    for stream in (out, err):
        stream.flush()
        texts.append(stream.buffer.getvalue().decode("utf-8", "surrogateescape"))
    return code or 0, texts[0], texts[1]


def check(program: str, argv: list[str], code: int, stderr: str) -> None:
    """The contract. A sweep (es-train with --seeds) may fail in several of its runs after the
    up-front check of its configs passed: one error line per failed run."""
    where = f"{program} {argv!r} -> exit {code}, stderr:\n{stderr}"
    assert code in ALLOWED_CODES, where
    assert "Traceback" not in stderr, where
    if code == 2:
        lines = stderr.strip().splitlines()
        sweep = program == "es-train" and "--seeds" in argv
        assert len(lines) == 1 or sweep, where
        assert all(line.startswith(f"{program}") and ": error: " in line for line in lines), where


def fuzz_in_process(program: str, argv: list[str], world: Path) -> None:
    here = Path(tempfile.mkdtemp(dir=world))
    try:
        argv = [resolve(token, world, here) for token in argv]
        code, _, stderr = invoke(program, argv, here)
        check(program, argv, code, stderr)
    finally:
        shutil.rmtree(here, ignore_errors=True)


def fuzz_subprocess(program: str, argv: list[str], world: Path) -> None:
    here = Path(tempfile.mkdtemp(dir=world))
    try:
        argv = [resolve(token, world, here) for token in argv]
        done = run_cli([program, *argv], timeout=60, cwd=here)
        check(program, argv, done.returncode, done.stderr)
    finally:
        shutil.rmtree(here, ignore_errors=True)


FUZZ = settings(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(FUZZ, max_examples=200)
@given(argv=train_argv)
def test_es_train_any_argv(world, argv):
    fuzz_in_process("es-train", argv, world)


@settings(FUZZ, max_examples=200)
@given(argv=eval_argv)
def test_es_eval_any_argv(world, argv):
    fuzz_in_process("es-eval", argv, world)


@settings(FUZZ, max_examples=100)
@given(argv=plot_argv)
def test_es_plot_any_argv(world, argv):
    fuzz_in_process("es-plot", argv, world)


@settings(FUZZ, max_examples=200)
@given(argv=baseline_argv)
def test_es_baseline_any_argv(world, argv):
    fuzz_in_process("es-baseline", argv, world)


@settings(FUZZ, max_examples=25)
@given(argv=bench_argv)
def test_es_bench_any_argv(world, argv):
    fuzz_subprocess("es-bench", argv, world)


@settings(FUZZ, max_examples=20)
@given(argv=compare_argv)
def test_es_compare_any_argv(world, argv):
    fuzz_subprocess("es-compare", argv, world)


@pytest.mark.parametrize("program", sorted(IN_PROCESS))
def test_every_program_reports_a_parse_error_in_one_line(world, program):
    code, out, err = invoke(program, ["--no-such-flag"], world)
    assert code == 2 and out == "", err
    assert err.splitlines() == [err.strip()] and err.startswith(f"{program}: error: "), err
    assert f"(see {program} --help)" in err
    code, out, _ = invoke(program, ["--help"], world)
    assert code == 0 and "usage:" in out


@pytest.mark.parametrize(
    ("program", "argv", "fragment"),
    [
        ("es-eval", ["RUN", "--episodes", "x\ny"], "invalid int value: 'x\\ny'"),
        ("es-train", ["CONFIG", "--set", "es.a\nb=1"], "unknown key es.a\\nb"),
        ("es-plot", ["MISSING\u2028x", "--figure", "p.png"], "\\u2028"),
    ],
)
def test_line_breaks_in_what_the_user_typed_stay_on_one_line(world, program, argv, fragment):
    here = Path(tempfile.mkdtemp(dir=world))
    code, _, err = invoke(program, [resolve(a, world, here) for a in argv], here)
    assert code == 2 and len(err.strip().splitlines()) == 1 and fragment in err, err
