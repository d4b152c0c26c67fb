"""The dump layouts passband reads (one module each; :mod:`pipeline.rollout.layout` describes the contract)."""
