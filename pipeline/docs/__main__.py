"""``python -m pipeline.docs``: see :mod:`pipeline.docs`."""

import sys

from pipeline.docs import main

sys.exit(main())
