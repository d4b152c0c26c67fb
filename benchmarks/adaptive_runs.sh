#!/bin/bash
# Real parts (b), (c) and the prior run of benchmarks/adaptive_vs_fixed.py, on the embedded model.
# Data lives under benchmarks/out/ (git-ignored). Heavy: holds the shared lock once, <= ~15 min (each step
# bounded by a timeout; the rollout stage resumes, so re-running this script continues where it stopped).
#   benchmarks/adaptive_runs.sh [N_A] [N_B]     # problems for policy A (fixed k=32 and adaptive), for B
# Time bounds per step (seconds) from the environment: T_FIXED_A (480), T_ADAPTIVE_A (300), T_FIXED_B (150);
# the issue's size (all 205 problems for A) is e.g. T_FIXED_A=3600 T_ADAPTIVE_A=2400 T_FIXED_B=2400 ... 205 96
set -u
cd "$(dirname "$0")/.." && export PYTHONPATH=$PWD
NA=${1:-64}; NB=${2:-32}
D=benchmarks/out/adaptive; E=benchmarks/out/adaptive-e2e; P=.venv/bin/passband
mkdir -p $D $E
cat > $D/params.yaml <<'YAML'
# adaptive-budget experiment (written by benchmarks/adaptive_runs.sh): 205 synthetic problems, two policies, k=32
paths:
  problems: data/problems
  rejects: data/rejects
  policies: data/policies
  rollouts: data/rollouts
  verdicts: data/verdicts
  flags: data/flags
  difficulty: data/difficulty
  reformulated: data/reformulated
  catalog: data/passband.duckdb
  metrics: data/metrics
  plots: data/plots
  models: ../../../data/models
  published: data/published
ingest:
  sources:
    - {name: synthetic, kind: synthetic, split: train, options: {n_per_level: 24, seed: 0}}
policies:
  smollm2-135m-3shot:
    model: embedded
    engine: vllm
    dtype: float32
    prompt: fewshot_arith
    sampling: {temperature: 0.8, top_p: 1.0, top_k: -1, max_tokens: 48, stop: ["\nQ:", "\n\n"]}
  smollm2-135m-3shot-terse:
    model: embedded
    engine: vllm
    dtype: float32
    prompt: fewshot_arith
    system_prompt: "Answer each arithmetic question with one short line."
    sampling: {temperature: 0.8, top_p: 1.0, top_k: -1, max_tokens: 48, stop: ["\nQ:", "\n\n"]}
rollout:
  policies: [smollm2-135m-3shot]
  k: 32
  sources: [synthetic]
  limit: LIMIT
  shard_size: 16
  engine_options:
    vllm: {max_num_seqs: 32, max_model_len: 1024, kv_cache_gib: 2, enforce_eager: true, max_queued: 256}
YAML
sed -e "s/LIMIT/$NA/" -e 's/  k: 32/  k: 32\n  budget: {kind: adaptive, min_k: 4, step: 4, confidence: 0.95}/' $D/params.yaml > $E/params.yaml
[ -f data/models/smollm2-135m-instruct/config.json ] || flock /tmp/pb-heavy.lock nice -n 5 $P prepare-model
sed -e "s/LIMIT/$NA/" $D/params.yaml > $D/run-a.yaml
sed -e "s/LIMIT/$NB/" -e "s/policies: \[smollm2-135m-3shot\]/policies: [smollm2-135m-3shot-terse]/" $D/params.yaml > $D/run-b.yaml
sed -e "s/LIMIT/$NA/" -e "s/policies: \[smollm2-135m-3shot\]/policies: [smollm2-135m-3shot, smollm2-135m-3shot-terse]/" \
  $D/params.yaml > $D/run.yaml
[ -d $D/data/problems ] || $P ingest --params $D/run-a.yaml --no-progress
[ -d $E/data/problems ] || $P ingest --params $E/params.yaml --no-progress
flock /tmp/pb-heavy.lock nice -n 5 bash -c "
  n=\$(ls $D/metrics-fixedA-*.json 2>/dev/null | wc -l)
  timeout -s INT -k 30 ${T_FIXED_A:-480} $P rollout --params $D/run-a.yaml --no-progress; cp $D/data/metrics/rollout.json $D/metrics-fixedA-\$n.json; cp $D/data/logs/timings/rollout.json $D/timings-fixedA-\$n.json
  timeout -s INT -k 30 ${T_ADAPTIVE_A:-300} $P rollout --params $E/params.yaml --no-progress; cp $E/data/metrics/rollout.json $E/metrics-adaptiveA-\$n.json; cp $E/data/logs/timings/rollout.json $E/timings-adaptiveA-\$n.json
  timeout -s INT -k 30 ${T_FIXED_B:-150} $P rollout --params $D/run-b.yaml --no-progress; cp $D/data/metrics/rollout.json $D/metrics-fixedB-\$n.json; cp $D/data/logs/timings/rollout.json $D/timings-fixedB-\$n.json"
nice -n 5 $P verify --params $D/run.yaml --no-progress
nice -n 5 $P verify --params $E/params.yaml --no-progress
nice -n 5 $P annotate --params $E/params.yaml --no-progress --no-plots
nice -n 5 $P annotate --params $D/run.yaml --no-progress --no-plots
.venv/bin/python benchmarks/adaptive_vs_fixed.py --real $D/run.yaml --policy smollm2-135m-3shot-terse \
  --prior-policy smollm2-135m-3shot --weight 0.5 --e2e $E/params.yaml
$P drift --params $D/run.yaml --from smollm2-135m-3shot --to smollm2-135m-3shot-terse
