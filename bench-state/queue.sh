#!/bin/bash
# The long suite runs issue 43 still needs, one at a time, in the order the issue asks for
# them (Humanoid first). Each `es-bench suite` call resumes its output folder where it
# stopped, so this script can be killed (SIGTERM) and started again at any point.
#   CHECKOUT=/work/bg OUT=/work/bgout setsid nohup bash bench-state/queue.sh >> /work/bgout/queue.log 2>&1 &
set -u
cd "${CHECKOUT:-/work/bg}"
out=${OUT:-/work/bgout}
for seed in 0 2 3 4; do
  .venv/bin/es-bench suite configs/suites/mujoco.toml --tasks humanoid --seeds $seed \
    --out "$out/suite_humanoid" || exit $?
done
# The design variants of docs/benchmarks.md's History table, at the same step budgets.
for task in swimmer halfcheetah_b4_cut500 halfcheetah_b4_whole halfcheetah; do
  for seed in 0 1 2 3 4; do
    .venv/bin/es-bench suite configs/suites/mujoco_variants.toml --tasks $task --seeds $seed \
      --out "$out/suite_variants" || exit $?
  done
done
for seed in 10 11 12 0 1 2 3 4; do
  .venv/bin/es-bench suite configs/suites/mujoco_steps.toml --tasks walker2d --seeds $seed \
    --out "$out/suite_steps_walker2d" || exit $?
done
.venv/bin/es-bench suite configs/suites/mujoco_steps.toml --tasks ant --seeds 10 \
  --out "$out/suite_steps_ant" || exit $?
# Issue 42's whole-run cost of the OpenAI-ES Walker2d and Ant configs (30 minutes each at the
# suite's time budget, seed 0): before Ant's other seeds, as issue 42 comes before issue 43.
.venv/bin/es-bench suite configs/suites/mujoco.toml --tasks walker2d,ant --strategies openai \
  --seeds 0 --out "$out/suite_time_openai" || exit $?
for seed in 11 12 0 1 2 3 4; do
  .venv/bin/es-bench suite configs/suites/mujoco_steps.toml --tasks ant --seeds $seed \
    --out "$out/suite_steps_ant" || exit $?
done
