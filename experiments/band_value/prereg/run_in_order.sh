#!/usr/bin/env bash
# Run the pre-registered design (../PREREGISTRATION.md) one run at a time, in plan order (`design.py plan`: every
# prefix keeps the arms' ratio), on the band-value experiment's pinned passband: the pool's published folder and
# the pin from ../dvc.yaml, the held-out set ingested and the base policy measured once, every run's draw
# written, then each run trained and at once measured. A run whose results/ git holds is skipped, so the design
# goes on across sessions; commit results/<run> as each finishes. Never beside a timing benchmark or another run.
# Nothing here analyses: prereg_analysis.py runs once, after the last run (the stopping rule).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exp="$(dirname "$here")"
cd "$exp/../.."
dvc repro "$exp/dvc.yaml:pin" "$exp/dvc.yaml:publish"
# The pinned passband first, then the experiment's own modules (design.py's bandvalue, signal_gate); and no Python
# puts the current folder (this checkout's pipeline/, which is not the pin) or a script's folder on its path: the
# pinned verify pool's forkserver (a `python -c`) imported this checkout's pipeline/ into the workers of
# `band-value train` (TypeError: _worker() missing 2 required positional arguments; 29 Nov 2026, the run failed).
export PYTHONSAFEPATH=1
export PYTHONPATH="$exp/data/passband:$exp"
design() { python "$exp/design.py" "$@"; }
kept() { [ -n "$(git ls-files -- "$here/results/$1")" ]; }
passband ingest --params "$here/params.yaml" --no-progress
kept base || design measure base
design arms
read -r -a order < <(design plan | python -c 'import json, sys; print(" ".join(json.loads(l)["name"] for l in sys.stdin))')
for name in "${order[@]}"; do
  if kept "$name"; then
    continue
  fi
  # a whole checkpoint (a run stopped while it was measured) is measured, not trained again
  design trained "$name" || design train "$name"
  design measure "$name"
  echo "run_in_order: $name measured: commit $here/results/$name"
done
