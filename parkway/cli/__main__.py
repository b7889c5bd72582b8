"""``python -m parkway.cli``: the ``parkway`` command."""

import sys

from .commands import main

sys.exit(main())
