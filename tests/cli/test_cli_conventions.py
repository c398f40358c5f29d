"""One set of command-line conventions across every ``es-*`` program, sub-command and
benchmark script: a flag name means one thing, with one type, everywhere (``es.cli.args``)."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from collections import defaultdict

import pytest
from conftest import REPO, run_cli

from es.cli import args as cliargs
from es.cli import baseline, bench, compare, evaluate, plot, train

SCRIPTS = sorted(p.stem for p in (REPO / "scripts").glob("*.py") if p.stem != "report")


def script_module(name: str):
    """A script imported as ``python scripts/NAME.py`` sees it: ``report`` importable."""
    folder = str(REPO / "scripts")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)


def every_parser() -> dict[str, argparse.ArgumentParser]:
    """Every program's parser, its sub-commands' ("es-bench scaling") and every script's."""
    parsers = {"es-train": train.train_parser(), "es-eval": evaluate.parser(),
               "es-bench": bench.parser(), "es-plot": plot.parser(),
               "es-baseline": baseline.parser(), "es-compare": compare.parser()}
    parsers |= {f"scripts/{name}.py": script_module(name).parser() for name in SCRIPTS}
    for program, parser in list(parsers.items()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers |= {f"{program} {name}": sub for name, sub in action.choices.items()}
    return parsers


PARSERS = every_parser()


def definitions() -> dict[str, dict[str, argparse.Action]]:
    """option string -> {parser name: its action}, for options in two or more parsers."""
    where: dict[str, dict[str, argparse.Action]] = defaultdict(dict)
    for name, parser in PARSERS.items():
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    where[option][name] = action
    return {option: users for option, users in where.items() if len(users) > 1}


SHARED = definitions()


def test_the_parsers_of_every_program_and_script_are_collected():
    assert {"es-bench scaling", "es-bench comm", "es-bench suite", "es-bench bbob",
            "es-bench highdim", "scripts/chaos.py", "scripts/bench_solve.py"} <= set(PARSERS)
    assert {"--seeds", "--ranks", "--out", "--budget-s", "--config", "--jobs"} <= set(SHARED)


def kind(flag_type):
    """A list flag's type is made per program (what it allows: --dims 2..100 in one, >= 1 in
    another); its kind, a comma-separated list, is what must be alike."""
    return getattr(flag_type, "flag_kind", flag_type)


@pytest.mark.parametrize("option", sorted(SHARED))
def test_a_flag_in_several_parsers_is_defined_alike(option):
    users = SHARED[option]
    first_name, first = next(iter(users.items()))
    for name, action in users.items():
        where = f"{option}: {name} vs {first_name}"
        assert type(action) is type(first), where
        assert kind(action.type) is kind(first.type) and action.nargs == first.nargs, where
        assert action.dest == first.dest and action.metavar == first.metavar, where
        assert action.option_strings == first.option_strings, where
        if option in cliargs.FLAGS:  # a program adds its detail after the shared meaning
            assert action.help.startswith(cliargs.FLAGS[option]["help"]), where
            if "default" in cliargs.FLAGS[option]:
                assert action.default == cliargs.FLAGS[option]["default"], where
        else:  # defined twice outside cliargs: then identically
            assert (action.help, action.default, action.choices) == (
                first.help, first.default, first.choices), where


def test_seeds_is_always_a_list_and_seed_always_one():
    for name, action in SHARED["--seeds"].items():
        assert kind(action.type) is cliargs.parse_seeds, name
    for name, action in SHARED["--seed"].items():
        assert action.type is cliargs.nonnegative_int, name
    assert cliargs.parse_seeds("1-2,7") == [1, 2, 7] and cliargs.parse_seeds("3") == [3]
    for bad in ("", "a", "3-1", "1,1", "-2", "1-", "0,2-"):  # "1-" ran seed 1 alone
        with pytest.raises(ValueError, match="expected seeds"):
            cliargs.parse_seeds(bad)
    assert len(cliargs.parse_seeds(f"0-{cliargs.MAX_SEEDS - 1}")) == cliargs.MAX_SEEDS


def test_a_huge_seed_range_is_refused_before_it_is_built():
    # Counted, not listed: a list of 10^11 seeds would exhaust memory before any check.
    with pytest.raises(ValueError, match=r"100000000001 seeds; at most 10000 in one sweep"):
        cliargs.parse_seeds("0-100000000000")
    done = run_cli(["es-train", "configs/cartpole.toml", "--seeds", "0-100000000000"],
                   timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "at most 10000 in one sweep" in done.stderr


def test_ranks_is_a_list_and_one_value_where_a_run_takes_one_rank_count():
    several = {name for name, action in SHARED["--ranks"].items() if action.several}
    assert several == {"es-bench scaling", "scripts/bench_pg_allreduce.py"}
    assert cliargs.parse_ranks("1,2,4,64") == [1, 2, 4, 64] and cliargs.parse_ranks("2") == [2]
    for bad in ("1,x", "0,2", "4,2", "2,2"):
        with pytest.raises(ValueError, match="expected increasing rank counts >= 1, e.g. 1,2,4"):
            cliargs.parse_ranks(bad)
    for bad in ("", "0", "x"):  # one count: no list suggested, which some programs refuse
        with pytest.raises(ValueError, match="expected a rank count >= 1, e.g. 2$"):
            cliargs.parse_ranks(bad)


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_help_ends_with_examples(name):
    text = PARSERS[name].format_help()
    examples = text.split("\nexamples:\n")
    assert len(examples) == 2 and examples[1].strip(), text


def test_out_is_a_folder_under_bench_results_and_budgets_are_budget_s():
    for name, action in SHARED["--out"].items():
        # A fixed folder, or one per env or suite that the program names (said in the help).
        assert (action.default or "").startswith("bench-results/") or (
            action.default is None and "default: bench-results/" in action.help), name
    retired = {"--csv", "--seconds", "--max-seconds"}
    for name, parser in PARSERS.items():
        options = {o for action in parser._actions for o in action.option_strings}
        assert not options & retired, name
    assert PARSERS["es-plot"]._option_string_actions["-o"].dest == "figure"


@pytest.mark.parametrize(("argv", "prog", "fragment"), [
    (["es-train", "configs/cartpole.toml", "--seeds", "3-1"], "es-train", "--seeds: '3-1'"),
    (["es-compare", "--env", "CartPole-v1", "--seeds", "3-1"], "es-compare", "--seeds: '3-1'"),
    (["es-bench", "highdim", "--seeds", "3-1"], "es-bench highdim", "--seeds: '3-1'"),
    # pycma reads 0 as 'from the clock': said at once, not after "-1" was refused for >= 0.
    (["es-bench", "highdim", "--seeds=-1"], "es-bench highdim",
     "--seeds: '-1': expected seeds >= 1 (pycma reads seed 0 as 'from the clock') like 1-5"),
    (["es-bench", "highdim", "--seeds", "1,0"], "es-bench highdim", "expected seeds >= 1"),
    (["es-bench", "scaling", "--ranks", "0"], "es-bench scaling", "--ranks: '0'"),
    # A program that takes one count suggested a list (e.g. 1,2,4), which it then refused.
    (["es-compare", "--env", "CartPole-v1", "--ranks", "0"], "es-compare",
     "--ranks: '0': expected a rank count >= 1, e.g. 2 "),
    (["es-bench", "scaling", "--ranks", "2,0"], "es-bench scaling",
     "--ranks: '2,0': expected increasing rank counts >= 1, e.g. 1,2,4 "),
    (["es-compare", "--env", "CartPole-v1", "--ranks", "1,2"], "es-compare",
     "one rank count per run"),
    (["es-bench", "suite", "configs/suites/mujoco.toml", "--ranks", "2,4"], "es-bench suite",
     "one rank count per run"),
])
def test_bad_seeds_and_ranks_are_one_line_errors(argv, prog, fragment):
    done = run_cli(argv, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"{prog}: error: ") and fragment in lines[0], done.stderr


@pytest.mark.parametrize("flag", ["--run-dir", "--resume", "--resume-or-start"])
def test_an_empty_run_folder_is_refused_not_taken_for_a_new_one(tmp_path, flag):
    """A batch script's unset ``$RUN_DIR``: every requeue started a new run under runs/."""
    done = run_cli(["es-train", "configs/cartpole.toml", flag, ""], cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"es-train: error: argument {flag}: '': expected a folder's path "
                           "(is a variable in the command line unset?) (see es-train --help)\n")
    assert not (tmp_path / "runs").exists()


def test_a_script_reports_bad_ranks_in_one_line_too():
    done = subprocess.run([sys.executable, "scripts/bench_solve.py", "--ranks", "1,2"],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("bench_solve.py: error: argument --ranks: '1,2': one rank "
                                  "count per run"), done.stderr


def test_a_scripts_default_config_is_found_from_any_folder(tmp_path):
    """From another folder its default config was "not found"; and --generations 4 was
    raised to 5 without a word."""
    done = subprocess.run([sys.executable, str(REPO / "scripts/bench_torch_policy.py"),
                           "--generations", "4"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and done.stderr == (
        "bench_torch_policy.py: error: --generations 4: must be >= 5 (see "
        "bench_torch_policy.py --help)\n"), done.stderr


@pytest.mark.parametrize("command", [
    ["es-train", "configs/cartpole.toml", "--set", "run.generations=6", "--set",
     "es.population=8", "--run-dir", "{tmp}/run"],
    ["es-bench", "bbob", "--functions", "1,2", "--instances", "1", "--dims", "2",
     "--budget-per-dim", "50", "--out", "{tmp}/bbob"],
])
def test_a_reader_that_leaves_early_ends_neither_the_work_nor_its_files(tmp_path, command):
    """``es-train ... | head -1``: every later line was a BrokenPipeError (a logging error per
    generation, then a traceback and exit 1); es-bench bbob lost its results folder."""
    from conftest import tool

    argv = [tool(command[0]), *(a.replace("{tmp}", str(tmp_path)) for a in command[1:])]
    job = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    assert job.stdout.readline()  # the first line, as head -1 reads it
    job.stdout.close()
    _, stderr = job.communicate(timeout=300)
    assert job.returncode == 0, stderr.decode()[-2000:]
    assert b"BrokenPipe" not in stderr and b"Traceback" not in stderr
    produced = tmp_path / ("run" if command[0] == "es-train" else "bbob")
    assert (produced / ("policy.npz" if command[0] == "es-train" else "runs.csv")).is_file()


def test_a_line_ranks_print_at_once_is_one_write(monkeypatch):
    """Unbuffered (as es-compare runs its runs), print wrote the newline apart, and two ranks'
    lines ran together: "interrupted on rank 1es-baseline: interrupted on rank 0"."""
    import sys

    from es.cli.args import fail, say_line

    class Recorder:
        def __init__(self) -> None:
            self.writes: list[str] = []

        def write(self, text: str) -> int:
            self.writes.append(text)
            return len(text)

        def flush(self) -> None:
            pass

    recorder = Recorder()
    monkeypatch.setattr(sys, "stderr", recorder)
    say_line("es-baseline: interrupted on rank 1")
    fail("es-train", "bad")
    assert recorder.writes == ["es-baseline: interrupted on rank 1\n",
                               "es-train: error: bad\n"]
