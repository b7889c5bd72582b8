"""``python -m bench``: the benchmark harness (see bench/cli.py; results in bench/RESULTS.md)."""

import sys

from .cli import main

try:
    sys.exit(main())
except KeyboardInterrupt:
    print("bench: interrupted; tasks, workers and the benchmark's redis-server are stopped", file=sys.stderr)
    sys.exit(130)
