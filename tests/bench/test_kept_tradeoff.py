"""scripts/kept_tradeoff.py: the stop's race of the trainer's kept-policy rule, replayed on a
bench_kept study's episodes, says what each rule costs (episodes) and buys (the kept
policy's falls)."""

import csv
import subprocess
import sys

from conftest import REPO

# Three evaluated policies of one run: generation 6 evaluates best but falls once in 100
# episodes, generation 3 never falls, generation 9 falls every other episode.
POLICIES = {3: (100.0, [100.0] * 100, 0), 6: (200.0, [200.0] * 99 + [0.0], 1),
            9: (150.0, [150.0, 10.0] * 50, 50)}


def write_study(folder):
    (folder / "seed0").mkdir(parents=True)
    with (folder / "results.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["seed", "generation", "eval_score", "mean", "median", "worst",
                         "falls", "episodes"])
        for generation, (score, returns, falls) in POLICIES.items():
            writer.writerow([0, generation, score, 0, 0, 0, falls, len(returns)])
    with (folder / "seed0" / "returns.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["generation", "reset_seed", "return"])
        for generation, (_, returns, _) in POLICIES.items():
            writer.writerows([generation, k, value] for k, value in enumerate(returns))


def test_more_confirmation_episodes_cost_more_and_keep_the_policy_that_never_falls(tmp_path):
    write_study(tmp_path / "study")
    done = subprocess.run([sys.executable, "scripts/kept_tradeoff.py", str(tmp_path / "study"),
                           "--steps", "100000", "--best-episodes", "100,10", "--every", "1",
                           "--trials", "60", "--out", str(tmp_path / "out")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    with (tmp_path / "out" / "results.csv").open() as handle:
        thorough, quick = list(csv.DictReader(handle))
    # Judged by 100 episodes: generation 6 plays until its fall (a round of 10 at a time),
    # generation 9 one round (a fall), then generation 3, which may now score highest, all
    # 100, and is kept, which ends the others: generation 3 every time, at 110 episodes plus
    # 10 per round generation 6 held.
    assert float(thorough["kept_mean"]) == 100 and float(thorough["no_fall_in_20"]) == 1
    assert 120 <= float(thorough["race_episodes"]) <= 210
    assert float(thorough["race_share"]) == float(thorough["race_episodes"]) * 1000 / 100000
    # Judged by 10: generation 6 mostly holds at once (its fall unseen), and is kept.
    assert float(quick["race_episodes"]) < 20
    assert 150 < float(quick["kept_mean"]) < 200
    assert 0.8 < float(quick["no_fall_in_20"]) < 1


def test_a_folder_that_is_no_study_or_a_budget_it_did_not_train_is_one_line(tmp_path):
    """Another script's folder ended in a FileNotFoundError traceback; a --steps other than
    the study's budget gave a race share of the wrong run length, silently."""
    def refused(folder, steps="100000"):
        done = subprocess.run([sys.executable, "scripts/kept_tradeoff.py", str(folder),
                               "--steps", steps, "--out", str(tmp_path / "out")],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
        assert (done.returncode, done.stdout) == (2, "") and done.stderr.count("\n") == 1
        return done.stderr

    (tmp_path / "solve").mkdir()
    (tmp_path / "solve" / "results.csv").write_text("config,seed,steps\ncartpole,0,100\n")
    assert f"'{tmp_path / 'solve'}': its results.csv lacks the columns eval_score, falls, " \
           "generation (not a scripts/bench_kept.py --out folder)" in refused(tmp_path / "solve")
    write_study(tmp_path / "study")
    (tmp_path / "study" / "seed0" / "config.toml").write_text("[run]\nmax_timesteps = 40000\n")
    assert "--steps 100000: the study's seed 0 trained run.max_timesteps = 40000; give that" \
        in refused(tmp_path / "study")
    (tmp_path / "study" / "seed0" / "returns.csv").unlink()
    assert "no seed0/returns.csv" in refused(tmp_path / "study", "40000")
    assert not (tmp_path / "out").exists()
