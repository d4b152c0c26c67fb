"""``python -m bandvalue``: the experiment's command line (:mod:`bandvalue.cli`)."""

from bandvalue.cli import band_value

if __name__ == "__main__":
    band_value(prog_name="python -m bandvalue")
