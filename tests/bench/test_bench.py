"""es-bench: the runner's parsing, steady-state arithmetic and a real smoke run."""

import csv

import pytest
from conftest import run_cli

from es.bench.scaling import (
    BREAKDOWN,
    efficiency,
    replaced_values,
    steady_state,
    step_efficiency,
)
from es.cli.bench import parser


def test_efficiency_arithmetic():
    assert efficiency("weak", 1, 2.0, 8, 2.5) == pytest.approx(0.8)
    assert efficiency("strong", 1, 8.0, 4, 2.5) == pytest.approx(0.8)
    assert efficiency("strong", 2, 4.0, 4, 2.0) == pytest.approx(1.0)
    # 2 ranks stepping 1.5x as fast as 1: each rank does 75% of the lone rank's steps/s.
    assert step_efficiency(1, 1000.0, 2, 1500.0) == pytest.approx(0.75)


def row(generation, time_s, timesteps, **breakdown):
    return {"generation": str(generation), "time_s": str(time_s), "timesteps": str(timesteps),
            "bytes_sent": "100", **{k: str(breakdown.get(k, 0.0)) for k in BREAKDOWN}}


def test_steady_state_skips_warm_up_and_the_final_evaluation():
    rows = [row(1, 5.0, 100), row(2, 6.0, 200), row(3, 7.0, 300, rollout_s=0.9),
            row(4, 8.0, 400, rollout_s=0.8), row(5, 9.0, 500, rollout_s=0.7),
            row(6, 20.0, 600, eval_s=10.0)]
    state = steady_state(rows)
    assert state["seconds_per_generation"] == pytest.approx(1.0)
    assert state["steps_per_s"] == pytest.approx(100.0)
    assert state["rollout_s"] == pytest.approx(0.75)
    assert state["eval_s"] == 0.0
    with pytest.raises(ValueError, match="at least 5 generations"):
        steady_state(rows[:4])


def test_scaling_smoke_run_writes_csv_and_table(tmp_path):
    out = tmp_path / "out"
    done = run_cli(["es-bench", "scaling", "--synthetic-step-ms", "0.5", "--mean-length", "20",
                    "--ranks", "1,2", "--generations", "5", "--repeats", "1", "--out", str(out)])
    assert done.returncode == 0, done.stderr
    with (out / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["ranks"]) for r in rows] == [1, 2]
    assert float(rows[0]["efficiency"]) == 1.0 and float(rows[1]["efficiency"]) > 0
    assert [int(r["population"]) for r in rows] == [16, 32]
    # What es-train runs unless told otherwise (every committed figure was static's).
    assert {r["schedule"] for r in rows} == {"dynamic"}
    assert "| ranks |" in (out / "results.md").read_text()
    bad = run_cli(["es-bench", "scaling", "--ranks", "2,1"])
    assert bad.returncode == 2 and "--ranks: '2,1'" in bad.stderr


def test_scaling_trains_the_config_as_it_is_unless_a_flag_replaces_a_value():
    """No silent replacement: the config's policy and noise table stay unless asked for."""
    as_it_is = parser().parse_args(["scaling", "--config", "configs/humanoid.toml"])
    assert replaced_values(as_it_is) == []
    asked = parser().parse_args(["scaling", "--config", "configs/humanoid.toml", "--env",
                                 "Hopper-v5", "--policy-kind", "linear", "--table-size", "1000000"])
    assert replaced_values(asked) == ["env.id=Hopper-v5", "policy.kind=linear",
                                      "es.noise_table_size=1000000"]


def test_scaling_with_a_cnn_names_the_keys_a_user_can_change_only_in_a_config(tmp_path):
    """``--policy-kind cnn`` was refused for the config's policy.obs_norm, which no flag of
    es-bench scaling can unset; a config es-train refuses now says where its keys change."""
    asked = parser().parse_args(["scaling", "--policy-kind", "cnn"])
    assert replaced_values(asked) == ["policy.kind=cnn", "policy.obs_norm=false"]
    done = run_cli(["es-bench", "scaling", "--config", "configs/cartpole.toml", "--policy-kind",
                    "cnn", "--ranks", "1", "--generations", "5", "--out", str(tmp_path)])
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("es-bench scaling: error: mpiexec -n 1 failed (exit 2): "
                                  "es-train: error: policy.kind = 'cnn' needs stacked image "
                                  "observations")
    assert done.stderr.endswith("; es-bench scaling trains configs/cartpole.toml as it is but "
                                "for --env, --policy-kind and --table-size: change any other "
                                "key in a copy of it given as --config\n")


def test_scaling_says_which_values_its_flags_replace(tmp_path):
    out = tmp_path / "out"
    done = run_cli(["es-bench", "scaling", "--config", "configs/cartpole.toml", "--policy-kind",
                    "linear", "--table-size", "20000", "--ranks", "1", "--generations", "5",
                    "--repeats", "1", "--members-per-rank", "4", "--out", str(out)])
    assert done.returncode == 0, done.stderr
    assert ("es-bench scaling: flags replace values of configs/cartpole.toml: "
            "policy.kind=linear, es.noise_table_size=20000") in done.stdout
    with (out / "results.csv").open() as handle:
        row = next(csv.DictReader(handle))
    assert (row["env"], row["policy"], row["noise_table_size"]) == (
        "CartPole-v1", "linear", "20000")


@pytest.mark.parametrize("flags, message", [
    (["--mode", "weak", "--population", "100"], "--population 100: not with --mode weak"),
    (["--mode", "strong", "--members-per-rank", "50"],
     "--members-per-rank 50: not with --mode strong"),
    (["--mode", "strong", "--population", "3"], "--population 3: must be even"),
    (["--mean-length", "20"], "--mean-length 20: only with --synthetic-step-ms"),
    # Both were refused by es-train after a launch, with a hint about config keys.
    (["--synthetic-step-ms", "2", "--mean-length", "50", "--max-length", "10"],
     "--mean-length 50: must be in [1, --max-length 10]"),
    (["--env", "CartPol-v1"], "es-bench scaling: error: env.id 'CartPol-v1': not a "
     "registered Gymnasium id (did you mean CartPole-v1?)"),
])
def test_scaling_refuses_a_population_flag_its_mode_would_ignore_or_change(flags, message):
    """Each was run without a word: weak scaling with population 16, strong with 64, an odd
    population as the next even one, a synthetic episode length on a real environment."""
    done = run_cli(["es-bench", "scaling", "--env", "CartPole-v1", "--ranks", "1", *flags])
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_bbob_refuses_bipop_without_restarts():
    """It ran without restarts, and said so in its header only."""
    done = run_cli(["es-bench", "bbob", "--bipop", "--dims", "2", "--functions", "1"])
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--bipop: a rule for restarts, and there are none: add --restarts N" in done.stderr


def test_comm_comparison_counts_scalars_against_a_full_all_reduce(tmp_path):
    out = tmp_path / "comm"
    # Population 2 at 1e5 parameters: a bytes ratio of 3e-05, whose CSV cell (no dot) once
    # failed to read back after every measurement was taken.
    done = run_cli(["es-bench", "comm", "--params", "1e3,1e5", "--populations", "2,64",
                    "--repeats", "3", "--late-ms", "2", "--out", str(out)])
    assert done.returncode == 0, done.stderr
    with (out / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert sorted((int(r["params"]), int(r["population"])) for r in rows) == [
        (1000, 2), (1000, 64), (100000, 2), (100000, 64)]
    for row in rows:
        # A float32 return per member plus each rank's int64 step count; a float32 gradient
        # from each rank for the all-reduce.
        assert int(row["es_bytes"]) == int(row["population"]) * 4 + 2 * 8
        assert int(row["allreduce_bytes"]) == 2 * 4 * int(row["params"])
        # Timed from the last rank's arrival, 2 ms after the others': the ES exchange beside
        # the same through MPI's non-blocking collectives.
        assert float(row["late_ms"]) == 2
        assert float(row["es_us"]) > 0 and float(row["es_collective_us"]) > 0
    for bad in ("1.5", "1e20"):  # once 1 parameter, and an MPI_Abort naming nothing
        refused = run_cli(["es-bench", "comm", "--params", bad, "--out", str(out)])
        assert refused.returncode == 2 and f"--params: '{bad}': expected comma-separated " \
            "whole counts from 1 to 1e9" in refused.stderr, refused.stderr


def test_projection_fits_a_per_rank_cost_and_extrapolates():
    from es.bench.scaling import project

    rows = [{"ranks": n, "mode": "weak", "rollout_s": 1.0, "wait_s": 0.001 * n,
             "update_s": 0.0, "io_s": 0.0} for n in (1, 2, 4, 8)]
    projected = {p["ranks"]: p for p in project(rows)}
    assert projected[80]["per_rank_cost_us"] == pytest.approx(1000.0)
    assert projected[1440]["projected_efficiency"] == pytest.approx(1.001 / 2.44)
    assert project([{**rows[0], "mode": "strong"}, rows[1]]) == []


def test_a_cluster_launcher_replaces_the_wheels_mpiexec():
    from es.bench.launch import mpiexec

    assert mpiexec(4, "es-train", "c.toml", launcher="srun --mpi=pmix") == [
        "srun", "--mpi=pmix", "-n", "4", "es-train", "c.toml"]
    assert mpiexec(2, "x", launcher="mpiexec -f 'my hosts'")[:3] == ["mpiexec", "-f", "my hosts"]
    assert mpiexec(2, "x")[0].endswith("mpiexec")


def test_a_launch_that_fails_names_the_launcher_given_and_its_own_complaint(tmp_path):
    """A hostfile that is not there read "mpiexec -n 2 failed (exit 255): ... main (...):
    error parsing parameters": neither the launcher given nor Hydra's line naming the file."""
    from es.bench.launch import BIN, run_mpi

    missing = tmp_path / "nohosts"
    with pytest.raises(RuntimeError) as failed:
        run_mpi(2, "true", launcher=f"{BIN / 'mpiexec'} -f {missing}")
    said = str(failed.value)
    assert said.startswith(f"{BIN / 'mpiexec'} -f {missing} -n 2 failed (exit "), said
    assert f"unable to open host file: {missing} ... " in said, said
