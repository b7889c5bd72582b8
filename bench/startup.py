"""Measured process of figure 8: how long the ``parkway`` command takes to start.

Runs each command as a new process ``count`` times, one at a time, and reports the wall time from
``Popen`` to exit (p50, p90, min). The script is the one beside this interpreter, as a user runs it;
``interrupts`` lists an empty database of the benchmark's own Redis, so the time is the start, the
connection and one listing call. parkway's bytecode is written first (``compiled``), as ``pip
install`` writes it: a checkout run under ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every
module of parkway at every start (about 0.1 s more), which no installed copy does.
"""

from __future__ import annotations

import compileall
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .env import emit_result

SECRET = "bench-startup-" + "s" * 32


def commands(url: str) -> dict[str, list[str]]:
    script = Path(sys.executable).with_name("parkway")
    parkway = [str(script)] if script.exists() else [sys.executable, "-m", "parkway.cli"]
    return {
        "parkway --help": [*parkway, "--help"],
        "parkway interrupts": [*parkway, "interrupts", "--redis-url", url],
        "python -c 'import parkway; parkway.Parkway'": [sys.executable, "-c", "import parkway; parkway.Parkway"],
    }


def timed(cmd: list[str], count: int) -> dict[str, float]:
    env = {**os.environ, "PARKWAY_SECRET": SECRET}
    seconds = []
    for _ in range(count):
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        seconds.append(time.perf_counter() - t0)
        if done.returncode != 0:  # said whole: a start that failed is no start time
            said = done.stderr.decode(errors="replace")[-1500:]
            raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {said}")
    seconds.sort()
    return {
        "p50_s": statistics.median(seconds),
        "p90_s": seconds[int(0.9 * (len(seconds) - 1))],
        "min_s": seconds[0],
    }


def compiled() -> None:
    """Write the bytecode of the parkway that the commands import (``__pycache__`` beside its modules)."""
    spec = importlib.util.find_spec("parkway")
    assert spec is not None and spec.submodule_search_locations
    for folder in spec.submodule_search_locations:
        compileall.compile_dir(folder, quiet=1)


def measure(params: dict[str, Any]) -> dict[str, Any]:
    count = int(params["count"])
    compiled()
    return {"commands": {name: timed(cmd, count) for name, cmd in commands(params["url"]).items()}, "count": count}


if __name__ == "__main__":
    emit_result(measure(json.loads(sys.argv[1])))
