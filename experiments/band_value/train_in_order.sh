#!/usr/bin/env bash
# Run the experiment's train stages in a balanced order: seed-major, then item draw, then arm, so whatever
# has finished when a session ends gives every arm the same (draw, seed) pairs. DVC records each stage in
# dvc.lock as it ends and skips the ones already there; interrupt with Ctrl-C (SIGINT): the run in progress
# is lost, the finished ones are kept. Then `dvc repro experiments/band_value/dvc.yaml` measures and reports.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
read -r -a order < <(python - "$here/band_value.yaml" <<'PY'
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
print(" ".join(f"{arm}-{d}-{s}" for s in c["seeds"] for d in c["draws"] for arm in c["arms"]))
PY
)
for item in "${order[@]}"; do
  dvc repro -s "experiments/band_value/dvc.yaml:train@$item"
done
