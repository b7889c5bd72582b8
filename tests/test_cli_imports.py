"""The ``parkway`` command starts light: what a command needs it imports when it runs."""

from __future__ import annotations

import subprocess
import sys

from tests.procs import ROOT

HEAVY = ("redis", "rq", "pydantic", "structlog", "msgpack", "fakeredis")

PROBE = """
import sys
from parkway import cli
try:
    cli.main({argv!r})
except SystemExit:
    pass
print("loaded:" + ",".join(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


def _loaded_by(argv: list[str]) -> list[str]:
    code = PROBE.format(argv=argv, heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    line = out.stdout.splitlines()[-1]
    assert line.startswith("loaded:"), out.stdout[-500:]
    return [m for m in line.removeprefix("loaded:").split(",") if m]


def test_help_imports_no_dependency() -> None:
    """`parkway --help` and a command's --help import neither redis, rq, pydantic nor structlog."""
    assert _loaded_by(["--help"]) == []
    assert _loaded_by(["resume", "--help"]) == []
    assert _loaded_by(["session", "--help"]) == []


def test_import_parkway_loads_the_surface_on_first_use() -> None:
    """`import parkway` is light; the first public name used loads the rest, and every name resolves."""
    code = (
        "import sys, parkway\n"
        "light = 'pydantic' not in sys.modules and 'redis' not in sys.modules\n"
        "names = [getattr(parkway, n) for n in parkway.__all__]\n"
        "print(light, len(names), 'redis' in sys.modules, parkway.Parkway.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    light, count, loaded, module = out.stdout.split()
    assert light == "True" and int(count) >= 40 and loaded == "True" and module == "parkway.client.sync"
