"""Training on passband's published configs: GRPO with TRL (:mod:`pipeline.train.grpo`), the learnability sampler
(:mod:`pipeline.train.sampler`) and the rollout recorder (:mod:`pipeline.train.recorder`). The band-value experiment
that uses them lives with its experiment (experiments/band_value/bandvalue)."""
