"""The ``parkway`` command starts light: what a command needs it imports when it runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import redis

from parkway import Parkway
from tests.conftest import SECRET
from tests.procs import ROOT

HEAVY = ("redis", "rq", "pydantic", "structlog", "msgpack", "fakeredis")

LISTING_NEVER = (
    "rich",  # structlog imports it when installed (schemathesis brings it): about 170 ms under load
    "structlog",
    "fastapi",
    "starlette",
    "uvicorn",
    "fakeredis",
    "lupa",
    "parkway.client.aio",
    "parkway.http.app",
    "parkway.workers.worker",
    "parkway.workers.rq_internals.worker",
    "parkway.runtime.deploy_check",
    "parkway.adapters.redis.scripts.calls",  # the scripts' argument classes: they load with the first transition
    "parkway.sessions.calls",
)
"""what a command that only reads Redis and prints (``interrupts``, ``runs``, ``show``) never imports:
issue 23's start-time target for ``parkway interrupts`` (figure 8 of ``python -m bench``) is kept by
this list, not by a timing assertion"""

PROBE = """
import sys
from parkway import cli
try:
    cli.main({argv!r})
except SystemExit:
    pass
print("loaded:" + ",".join(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


def _loaded_by(argv: list[str], heavy: tuple[str, ...] = HEAVY) -> list[str]:
    code = PROBE.format(argv=argv, heavy=heavy)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARKWAY_")}
    env["PARKWAY_SECRET"] = SECRET
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, env=env)
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


@pytest.mark.parametrize("command", [["interrupts"], ["interrupts", "--json"], ["runs"], ["show", "run_none"]])
def test_a_listing_command_imports_no_heavy_module(
    command: list[str], pw: Parkway, redis_url: str, redis_client: redis.Redis
) -> None:
    """`parkway interrupts`, `runs` and `show` on a Redis import neither structlog (nor rich through it),
    the HTTP app, the asyncio client, the worker, nor the embedded server: they read and print."""
    probe = (*LISTING_NEVER, "redis", "pydantic")  # these two it needs: they show the command ran
    assert _loaded_by([*command, "--redis-url", redis_url], probe) == ["pydantic", "redis"]


def test_the_asyncio_client_loads_when_first_asked_for() -> None:
    """`parkway.Parkway` does not import the asyncio client; `from parkway import AsyncParkway` and
    `from parkway.client import AsyncParkway` still give it."""
    code = (
        "import sys, parkway\n"
        "parkway.Parkway\n"
        "before = 'parkway.client.aio' in sys.modules\n"
        "from parkway import AsyncParkway\n"
        "from parkway.client import AsyncParkway as again\n"
        "print(before, AsyncParkway is again is parkway.AsyncParkway, AsyncParkway.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "parkway.client.aio"], out.stdout + out.stderr
