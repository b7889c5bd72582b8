"""``python -m parkway.cli``: the ``parkway`` command."""

import sys

from .program import main

sys.exit(main())
