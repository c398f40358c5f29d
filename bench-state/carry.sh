#!/bin/bash
# Tar the suite folders under $OUT with each run's newest checkpoint only into this folder.
here=$(dirname "$(readlink -f "$0")")
cd "${OUT:-/work/bgout}" || exit 1
list=$(mktemp)
for suite in suite_humanoid suite_steps_walker2d suite_steps_ant suite_time_openai suite_variants; do
  [ -d $suite ] || continue
  find $suite -path '*/checkpoints' -prune -o -type f -print >> $list
  for ck in $suite/runs/*/checkpoints; do
    [ -d $ck ] || continue
    newest=$(ls $ck/*.json 2>/dev/null | sort | tail -1)
    [ -n "$newest" ] && printf '%s\n%s\n' "$newest" "${newest%.json}.npz" >> $list
  done
done
tar czf "$here/suite_humanoid.tar.gz" -T $list
tar tzf "$here/suite_humanoid.tar.gz" | grep ckpt
