"""passband: model-relative difficulty annotation for RLVR datasets."""

__version__ = "0.1.0"
