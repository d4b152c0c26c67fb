#!/usr/bin/env bash
# Run the experiment in a balanced order: the stages up to the arms, the base policy's measurement, then each
# (arm, draw, seed) trained and at once measured, seed-major, then item draw, then arm, so whatever has finished
# when a session ends gives every arm the same (draw, seed) pairs. DVC records each stage in dvc.lock as it ends
# and skips the ones already there; interrupt with Ctrl-C (SIGINT): the stage in progress is lost, the finished
# ones are kept. Commit dvc.lock and results/ as you go: results/<name> (tables and training log, small) is what
# the report reads. A run whose results git holds while its checkpoint is absent (DVC's cache was lost) is
# skipped rather than retrained; moving the pin or the measured params makes those results stale: remove them
# first (`git rm -r experiments/band_value/results`). Then `dvc repro -s experiments/band_value/dvc.yaml:report`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
exp=experiments/band_value
read -r -a order < <(python - "$here/band_value.yaml" <<'PY'
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
print(" ".join(f"{arm}-{d}-{s}" for s in c["seeds"] for d in c["draws"] for arm in c["arms"]))
PY
)
kept() {  # results/$1 committed and unchanged, its checkpoint absent: measured in an earlier session
  local results="$exp/results/$1"
  [ -n "$(git ls-files -- "$results")" ] && git diff --quiet HEAD -- "$results" && [ ! -e "$exp/data/checkpoints/$1" ]
}
dvc repro "$exp/dvc.yaml:arms"
kept base || dvc repro -s "$exp/dvc.yaml:measure_base"
for item in "${order[@]}"; do
  IFS=- read -r arm draw seed <<< "$item"
  if kept "$arm-d$draw-s$seed"; then
    echo "train_in_order: $arm-d$draw-s$seed: results committed, checkpoint absent: kept, not retrained"
    continue
  fi
  dvc repro -s "$exp/dvc.yaml:train@$item" "$exp/dvc.yaml:measure@$item"
done
