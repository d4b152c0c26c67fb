#!/usr/bin/env bash
# Run the gated design (../PREREGISTRATION_GATED.md) one run at a time, in plan order (`design.py --design gated
# plan`: every prefix keeps the arms' ratio), on the band-value experiment's pinned passband (../dvc.yaml's pin):
# the pool measured once by passband's stages (ingest, rollout, verify, annotate, publish with params.yaml) and
# published into data/published, the base policy measured once on the held-out set, every run's draw written,
# then each run trained and at once measured. A run whose results/ git holds is skipped, so the design goes on
# across sessions; commit results/<run> as each finishes, and the pool's difficulty table (results/pool) once.
# Never beside a timing benchmark or another run. Nothing here analyses: gated_analysis.py runs once, after the
# last run (the stopping rule).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exp="$(dirname "$here")"
cd "$exp/../.."
dvc repro "$exp/dvc.yaml:pin"
# the pinned passband first, then the experiment's modules; no current folder on the path (../prereg/run_in_order.sh)
export PYTHONSAFEPATH=1
export PYTHONPATH="$exp/data/passband:$exp"
design() { python "$exp/design.py" --design gated "$@"; }
kept() { [ -n "$(git ls-files -- "$here/results/$1")" ]; }
stage() { passband "$1" --params "$here/params.yaml" "${@:2}"; }
if [ ! -e "$here/data/pool.done" ]; then
  stage ingest --no-progress
  stage rollout --set main --no-progress
  stage verify --set main --no-progress
  stage annotate --set main --no-plots --no-progress
  stage publish
  mkdir -p "$here/results/pool"
  cp -r "$here/data/difficulty" "$here/results/pool/"
  touch "$here/data/pool.done"
  echo "run_in_order: the pool measured and published: commit $here/results/pool"
fi
kept base || design measure base
design arms
read -r -a order < <(design plan | python -c 'import json, sys; print(" ".join(json.loads(l)["name"] for l in sys.stdin))')
for name in "${order[@]}"; do
  if kept "$name"; then
    continue
  fi
  design trained "$name" || design train "$name"
  design measure "$name"
  echo "run_in_order: $name measured: commit $here/results/$name"
done
