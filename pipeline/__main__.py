"""``python -m pipeline``: the passband command, for environments without the console script on PATH."""

from pipeline.cli import main

main()
