"""The ``passband`` subcommands: one module a command group, each a click command over a stage's public ``run`` (or
over the catalog). The CLI layer: :mod:`pipeline.cli` imports them lazily by name (``COMMANDS``), they read
params.yaml through :mod:`pipeline.cli_options`, and no stage imports them."""
