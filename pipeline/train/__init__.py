"""Training on passband's published configs: GRPO with TRL (:mod:`pipeline.train.grpo`) and the
band-value experiment (:mod:`pipeline.train.band_value`), which measures trained checkpoints with passband."""
