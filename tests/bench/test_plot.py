"""es.bench.curves, which es-plot and es-compare draw with: grouping the seeds of one config,
their labels and the mean ± std arithmetic; and es-plot's command line."""

import re

import numpy as np
import pytest
import tomli_w
from conftest import run_cli

from es.bench import curves
from es.cli import plot
from es.cli.plot import main
from es.rl.metrics import COLUMNS


def fake_run(folder, name, seed, evals, **settings):
    """A run folder: config.toml with run.name, run.seed, env.id and ``settings``
    (``{"es.sigma": 0.5}``), and one progress row per value of ``evals``, 100 steps apart."""
    config = {"run": {"name": name, "seed": seed}, "env": {"id": "CartPole-v1"}}
    for key, value in settings.items():
        section, _, field = key.partition(".")
        config.setdefault(section, {})[field] = value
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text(tomli_w.dumps(config))
    rows = [",".join(COLUMNS)]
    for generation, value in enumerate(evals, start=1):
        row = dict.fromkeys(COLUMNS, "0")
        row |= {"generation": str(generation), "timesteps": str(100 * generation),
                "eval_return": str(value), "eval_std": "1.0"}
        rows.append(",".join(row[c] for c in COLUMNS))
    (folder / "progress.csv").write_text("\n".join(rows) + "\n")
    return folder


def test_seeds_are_grouped_and_averaged(tmp_path):
    runs = [fake_run(tmp_path / f"s{seed}", "cartpole", seed, [10.0 * seed, 20.0 * seed])
            for seed in (1, 3)]
    other = fake_run(tmp_path / "other", "tuned", 0, [5.0, 6.0])
    groups = curves.group_runs([*runs, other])
    assert [(g.label, len(g.runs)) for g in groups] == [("CartPole-v1 · cartpole", 2),
                                                        ("CartPole-v1 · tuned", 1)]
    grid, mean, std, seeds = curves.group_curve(groups[0], "timesteps", "eval_return")
    assert list(grid) == [100.0, 200.0] and list(seeds) == [2, 2]
    assert list(mean) == pytest.approx([20.0, 40.0]) and list(std) == pytest.approx([10.0, 20.0])
    _, _, spread, _ = curves.group_curve(groups[1], "timesteps", "eval_return")
    assert list(spread) == [1.0, 1.0]  # one run: the std of its evaluation episodes


def test_on_a_log_axis_seeds_are_interpolated_along_log_x():
    """As a log axis draws each seed's rows: 10 lies halfway from 1 to 100."""
    seeds = [(np.array([1.0, 100.0]), np.array([0.0, 1.0]), np.zeros(2)),
             (np.array([10.0]), np.array([0.5]), np.zeros(1))]
    grid, mean, _, count = curves.seed_curve(seeds, log_x=True)
    assert list(grid) == [1.0, 10.0, 100.0] and list(count) == [1, 2, 1]
    assert mean[1] == pytest.approx(0.5)
    assert curves.seed_curve(seeds)[1][1] == pytest.approx((9 / 99 + 0.5) / 2)  # along x


def test_one_config_trained_by_different_programs_is_not_one_curve(tmp_path):
    """es-baseline pg, es-baseline ppo and es-train on one config were averaged as 3 seeds
    of one run: nothing in the folder said which program had trained it."""
    programs = ["es-baseline pg", "es-baseline ppo", None]  # None: es-train's, or older
    runs = [fake_run(tmp_path / f"run{seed}", "cartpole", seed, [1.0, 2.0])
            for seed in range(3)]
    for run, program in zip(runs, programs, strict=True):
        if program:
            (run / "trained_by.txt").write_text(program + "\n")
    assert sorted(group.label for group in curves.group_runs(runs)) == [
        "CartPole-v1 · cartpole · trained by=es-baseline pg",
        "CartPole-v1 · cartpole · trained by=es-baseline ppo",
        "CartPole-v1 · cartpole · trained by=es-train"]


def test_es_compare_runs_are_one_curve_per_method(tmp_path):
    """es-compare's runs: run.name is the method, the seeds differ in run.seed and
    run.max_seconds's end; drawn on a log x axis, rows at x = 0 left out."""
    runs = [fake_run(tmp_path / method / f"seed{seed}", method, seed,
                     [1.0 + seed] * (3 + seed), **{"run.max_seconds": 4.0})
            for method in ("es", "pg") for seed in (0, 1)]
    rows = (runs[0] / "progress.csv").read_text().splitlines()
    (runs[0] / "progress.csv").write_text("\n".join([rows[0], rows[1].replace(
        ",100,", ",0,", 1), *rows[1:]]) + "\n")  # a row at timesteps 0 first
    labels = curves.plot(runs, tmp_path / "compare.png", "timesteps", "eval_return", "title",
                         log_x=True)
    assert labels == ["CartPole-v1 · es (2 seeds, dotted where fewer)",
                      "CartPole-v1 · pg (2 seeds, dotted where fewer)"]
    assert (tmp_path / "compare.png").stat().st_size > 5000
    group, _ = curves.group_runs(runs)
    grid, _, _, seeds = curves.group_curve(group, "timesteps", "eval_return", log_x=True)
    assert list(grid) == [100.0, 200.0, 300.0, 400.0] and list(seeds) == [2, 2, 2, 1]


def test_es_plot_writes_an_image_and_rejects_bad_input(tmp_path, capsys):
    runs = [fake_run(tmp_path / f"s{seed}", "cartpole", seed, [1.0, 2.0, 3.0])
            for seed in (0, 1)]
    out = tmp_path / "curve.png"
    assert main([*map(str, runs), "--figure", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000
    assert main([*map(str, runs), "-o", str(tmp_path / "log.svg"), "--log-x"]) == 0
    assert (tmp_path / "log.svg").read_text().lstrip().startswith("<?xml")
    assert main([str(runs[0]), "-o", str(tmp_path / "curve.jpg")]) == 2
    assert "allowed suffixes are .png, .svg, .pdf" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty"), "-o", str(out)]) == 2
    assert capsys.readouterr().err == (f"es-plot: error: {tmp_path / 'empty'}: not a run folder "
                                       "(no progress.csv and no config.toml)\n")
    (runs[1] / "config.toml").unlink()  # it said "no progress.csv or config.toml" for either
    assert main([str(runs[1]), "-o", str(out)]) == 2
    assert capsys.readouterr().err == (f"es-plot: error: {runs[1]}: not a run folder (no "
                                       "config.toml)\n")


def test_a_sweeps_folder_is_its_runs_and_a_run_not_yet_evaluated_is_left_out(tmp_path,
                                                                              capsys):
    """``es-plot SWEEP`` said "not a run folder"; a sweep with one run not yet evaluated
    could not be drawn at all."""
    sweep = tmp_path / "sweep"
    for seed in (0, 1):
        fake_run(sweep / f"CartPole-v1__cartpole__{seed}", "cartpole", seed, [1.0, 2.0])
    late = fake_run(sweep / "CartPole-v1__cartpole__2", "cartpole", 2, [])  # no rows yet
    out = tmp_path / "sweep.png"
    assert main([str(sweep), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err == (f"es-plot: {late}: no rows with 'eval_return' in progress.csv: "
                            "left out\n")
    assert "CartPole-v1 · cartpole (2 seeds)" in captured.out and out.is_file()
    assert main([str(late), "-o", str(out)]) == 2  # nothing else to draw: an error
    assert capsys.readouterr().err == (f"es-plot: error: {late}: no rows with 'eval_return' "
                                       "in progress.csv\n")


def test_a_damaged_run_is_named_and_left_out_where_others_can_be_drawn(tmp_path, capsys):
    """A value that is not a number said only "could not convert string to float: 'oops'",
    naming no file, and one damaged run of a sweep (a bad value, a damaged config.toml)
    failed the whole figure."""
    sweep = tmp_path / "sweep"
    for seed in (0, 1):
        fake_run(sweep / f"CartPole-v1__cartpole__{seed}", "cartpole", seed, [1.0, 2.0])
    bad = fake_run(sweep / "CartPole-v1__cartpole__2", "cartpole", 2, [1.0, "oops"])
    broken = fake_run(sweep / "CartPole-v1__cartpole__3", "cartpole", 3, [1.0, 2.0])
    (broken / "config.toml").write_text("[run\n")
    out = tmp_path / "sweep.png"
    assert main([str(sweep), "-o", str(out)]) == 0
    said = capsys.readouterr()
    assert said.err.splitlines()[0] == (f"es-plot: {bad / 'progress.csv'}: generation 2's "
                                        "eval_return 'oops' is not a number: left out")
    assert said.err.splitlines()[1].startswith(f"es-plot: {broken / 'config.toml'}: ")
    assert "CartPole-v1 · cartpole (2 seeds)" in said.out and out.is_file()
    assert main([str(bad), "-o", str(out), "--x", "generation"]) == 2  # alone: an error
    assert capsys.readouterr().err == (f"es-plot: error: {bad / 'progress.csv'}: generation "
                                       "2's eval_return 'oops' is not a number\n")


def test_a_runs_file_is_not_no_such_folder(tmp_path, capsys):
    run = fake_run(tmp_path / "run", "cartpole", 0, [1.0])
    assert main([str(run / "progress.csv"), "-o", str(tmp_path / "x.png")]) == 2
    assert capsys.readouterr().err == (f"es-plot: error: {run / 'progress.csv'}: a file, not a "
                                       f"run folder (give {run})\n")


def test_a_folder_of_runs_and_sweeps_is_every_run_under_it(tmp_path, capsys):
    """``es-plot runs`` drew the single runs in runs/ and silently left out the sweeps beside
    them; a run that had written its config.toml but no progress.csv yet failed the figure."""
    runs = tmp_path / "runs"
    fake_run(runs / "CartPole-v1__cartpole__0", "cartpole", 0, [1.0, 2.0])
    for seed in (1, 2):
        fake_run(runs / "sweep" / f"CartPole-v1__cartpole__{seed}", "cartpole", seed, [3.0])
    starting = runs / "sweep" / "CartPole-v1__cartpole__3"
    starting.mkdir()
    (starting / "config.toml").write_text('[run]\nname = "cartpole"\nseed = 3\n')
    (runs / "CartPole-v1__cartpole__0" / "videos").mkdir()  # a run's own folders: not runs
    elsewhere = fake_run(tmp_path / "elsewhere" / "r4", "cartpole", 4, [4.0])
    (runs / "linked").symlink_to(elsewhere)  # a run linked in counts
    (runs / "sweep" / "up").symlink_to(runs)  # a link back up is walked once
    out = tmp_path / "all.png"
    assert main([str(runs), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err == f"es-plot: {starting}: no progress.csv yet: left out\n"
    assert "CartPole-v1 · cartpole (4 seeds, dotted where fewer)" in captured.out
    assert out.is_file()
    assert curves.runs_in(runs) == [runs / "CartPole-v1__cartpole__0", runs / "linked",
                                    *(runs / "sweep" / f"CartPole-v1__cartpole__{seed}"
                                      for seed in (1, 2, 3))]


def test_runs_that_differ_in_config_are_groups_labelled_by_the_keys(tmp_path, capsys):
    """The user's trial: es.sigma 0.1 and 0.5 keep one run name, but are two configs."""
    low = fake_run(tmp_path / "s1", "cartpole", 0, [10.0] * 30, **{"es.sigma": 0.1})
    high = fake_run(tmp_path / "s2", "cartpole", 0, [20.0] * 10,
                    **{"es.sigma": 0.5, "run.generations": 10})
    groups = curves.group_runs([low, high])
    assert [(g.label, len(g.runs)) for g in groups] == [
        ("CartPole-v1 · cartpole · es.sigma=0.1", 1), ("CartPole-v1 · cartpole · es.sigma=0.5", 1)]
    assert main([str(low), str(high), "-o", str(tmp_path / "p3.png")]) == 0
    out = capsys.readouterr().out
    assert "(2 groups)" in out and "seeds" not in out
    assert "  CartPole-v1 · cartpole · es.sigma=0.5\n" in out
    # A key one config.toml lacks counts as its default; every differing key is named.
    wide = fake_run(tmp_path / "s3", "cartpole", 0, [5.0], **{"es.sigma": 0.1,
                                                              "policy.hidden": [32]})
    labels = [g.label for g in curves.group_runs([low, high, wide])]
    assert labels == ["CartPole-v1 · cartpole · es.sigma=0.1, policy.hidden=[32]",
                      "CartPole-v1 · cartpole · es.sigma=0.1, policy.hidden=[64, 64]",
                      "CartPole-v1 · cartpole · es.sigma=0.5, policy.hidden=[64, 64]"]
    # Another run name or env is told apart by the name itself: no keys in its label.
    other = fake_run(tmp_path / "tuned", "tuned", 0, [1.0], **{"es.sigma": 0.3})
    assert "CartPole-v1 · tuned" in [g.label for g in curves.group_runs([low, high, other])]


def test_one_seed_twice_is_never_two_seeds(tmp_path, capsys):
    first, again, seed1 = (fake_run(tmp_path / f"r{i}", "cartpole", seed, [1.0, 2.0])
                           for i, seed in enumerate((0, 0, 1)))
    groups = curves.group_runs([first, again, seed1])
    assert [len(g.runs) for g in groups] == [1, 1, 1]
    assert {g.label for g in groups} == {f"CartPole-v1 · cartpole · seed {s} · {r}"
                                         for s, r in ((0, first), (0, again), (1, seed1))}
    # The same folder given twice (overlapping globs) is one run.
    assert main([str(first), str(tmp_path / "r0" / ".." / "r0"), "-o",
                 str(tmp_path / "p.png")]) == 0
    out = capsys.readouterr().out
    assert "(1 group)" in out and "seeds" not in out


def test_seeds_with_other_budgets_are_one_group_drawn_to_the_longest(tmp_path, capsys):
    """Budgets, evaluation and bookkeeping keys do not split seeds, nor cut the curve at the
    shortest seed: past it, the mean is over the seeds still running (dotted)."""
    long = fake_run(tmp_path / "long", "cartpole", 0, [float(g) for g in range(1, 31)],
                    **{"run.generations": 30, "run.max_seconds": 60.0})
    short = fake_run(tmp_path / "short", "cartpole", 1, [3.0, 4.0, 5.0],
                     **{"run.generations": 3, "run.max_timesteps": 300,
                        "run.eval_episodes": 2, "run.runs_dir": "elsewhere"})
    (group,) = curves.group_runs([long, short])
    assert group.label == "CartPole-v1 · cartpole" and len(group.runs) == 2
    grid, mean, std, seeds = curves.group_curve(group, "timesteps", "eval_return")
    assert grid[0] == 100.0 and grid[-1] == 3000.0  # the longer seed's end, not 300
    assert list(seeds[:3]) == [2, 2, 2] and set(seeds[3:]) == {1}
    assert mean[1] == pytest.approx(3.0) and std[1] == pytest.approx(1.0)  # (2 + 4) / 2
    assert mean[-1] == 30.0 and std[-1] == 0.0
    assert main([str(long), str(short), "-o", str(tmp_path / "p.png")]) == 0
    assert "CartPole-v1 · cartpole (2 seeds, dotted where fewer)" in capsys.readouterr().out


def test_seed_curve_interpolates_seeds_at_each_others_steps():
    grid, mean, _, seeds = curves.seed_curve([
        (np.array([0.0, 10.0]), np.array([0.0, 10.0]), np.zeros(2)),
        (np.array([5.0, 20.0]), np.array([1.0, 1.0]), np.zeros(2))])
    assert list(grid) == [0.0, 5.0, 10.0, 20.0] and list(seeds) == [1, 2, 2, 1]
    assert list(mean) == pytest.approx([0.0, 3.0, 5.5, 1.0])


def test_a_figure_path_that_cannot_be_written_is_refused_first(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("")
    (tmp_path / "d.png").mkdir()
    not_a_run = tmp_path / "missing"  # the figure's error comes before any run is read
    for figure, fragment in ((afile / "x.png", f"{str(afile)!r} is a file, not a folder"),
                             (afile / "sub" / "x.png", f"{str(afile)!r} is a file"),
                             # The example was d.png/out, which the suffix check refused.
                             (tmp_path / "d.png", "is a folder; give a file name, e.g. "
                              f"{tmp_path / 'd.png' / 'out.png'}"),
                             (tmp_path / f"{'a' * 300}.png", "File name too long")):
        assert main([str(not_a_run), "-o", str(figure)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"es-plot: error: --figure {str(figure)!r}") and fragment in err
        assert len(err.splitlines()) == 1 and "Errno" not in err


def test_help_is_plain_text():
    text = plot.parser().format_help()
    assert "``" not in text and "run.seed" in text


def test_es_plot_on_real_runs_of_two_sigmas(tmp_path):
    """As the user typed it: es-train's resolved config.toml, a budget that differs."""
    tiny = ["--set", "es.population=8", "--set", "es.noise_table_size=10000", "--quiet"]
    for folder, settings in (("a", ["es.sigma=0.1", "run.generations=3"]),
                             ("b", ["es.sigma=0.1", "run.generations=2", "run.seed=1"]),
                             ("c", ["es.sigma=0.5", "run.generations=2"])):
        sets = [token for kv in settings for token in ("--set", kv)]
        done = run_cli(["es-train", "configs/cartpole.toml", "--run-dir",
                        str(tmp_path / folder), *sets, *tiny])
        assert done.returncode == 0, done.stderr
    shown = run_cli(["es-plot", *(str(tmp_path / f) for f in "abc"), "-o",
                     str(tmp_path / "p.png")])
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[1:] == [
        "  CartPole-v1 · cartpole · es.sigma=0.1 (2 seeds, dotted where fewer)",
        "  CartPole-v1 · cartpole · es.sigma=0.5"]


def test_a_run_with_one_evaluation_is_drawn_as_a_point(tmp_path):
    """A line through one point draws nothing: such runs were in the legend but not on the
    plot. In SVG a marker is a path defined once: a circle's starts at (0, radius), a tick
    mark's at (0, 0)."""
    alone = fake_run(tmp_path / "alone", "short", 0, [5.0])
    longer = fake_run(tmp_path / "longer", "long", 0, [5.0, 6.0])
    for run, drawn in ((alone, True), (longer, False)):
        out = tmp_path / f"{run.name}.svg"
        assert main([str(run), "-o", str(out)]) == 0
        assert bool(re.search(r'<path id="m\w+" d="M 0 [1-9]', out.read_text())) is drawn


def test_a_figure_is_written_whole_or_not_at_all(tmp_path):
    """A full disk left a 0-byte figure in place of the earlier one, and an error naming no
    file ("[Errno 28] No space left on device")."""
    import errno

    from es.bench.curves import save_whole

    class FullDisk:
        def savefig(self, handle, **options):
            handle.write(b"\x89PNG")  # what fitted
            raise OSError(errno.ENOSPC, "No space left on device")

    figure = tmp_path / "p.png"
    figure.write_bytes(b"the earlier figure")
    with pytest.raises(OSError, match=rf"^{figure}: No space left on device$"):
        save_whole(FullDisk(), figure)
    assert figure.read_bytes() == b"the earlier figure"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["p.png"]
