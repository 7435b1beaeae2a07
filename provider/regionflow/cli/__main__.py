"""``python -m regionflow.cli``: the `regionflow` command."""
import sys

from . import main

sys.exit(main())
