"""The band-value experiment's own code: does a GRPO arm drawn from passband's learnable band train better than the
others? (docs/training.md, ../PREREGISTRATION.md.)

A consumer of passband, not part of it: it imports only names that ``pipeline``'s modules publish in their
``__all__`` (tests/test_public_api.py), so it runs on the working tree or on a pinned copy of passband (../pin.py).
:mod:`bandvalue.experiment` draws the arms, trains and measures them; :mod:`bandvalue.report` makes the tables,
contrasts and PNG; :mod:`bandvalue.cli` is ``python -m bandvalue``.
"""
