"""``python -m pdd_core`` runs the ``pdd`` command line."""

import sys

from pdd_core.cli import main

sys.exit(main())
