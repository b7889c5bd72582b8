"""The ten-minute tour (README.md, docs/getting-started/tour.md) runs as printed: its flows.py, a real
`parkway worker` and a real `parkway serve` process on Redis, the answer given through the route the
inbox page posts to, the run completed."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from tests.procs import ROOT, answers, free_port, wait_for
from tests.readme import section

TOUR = "## A ten-minute tour"
SKIPPED = ("pip install", "redis-server")
"""tour lines the test does not run: parkway is installed already, and the test's Redis is running"""


def _tour(page: Path | None = None) -> tuple[str, list[str], str]:
    """The tour's flows.py, its shell lines (comments off) and its last command, from the page that
    holds it (README.md first, then docs/)."""
    text = section(TOUR)[1] if page is None else page.read_text()[page.read_text().index(TOUR):]
    text = text.split("\n## ", 1)[0]
    module = re.search(r"```python\n(.*?)```", text, re.S)
    shells = re.findall(r"```sh\n(.*?)```", text, re.S)
    assert module is not None and len(shells) == 2, "the tour has its module and two shell blocks"
    lines = [re.sub(r"\s+#.*$", "", line) for line in shells[0].splitlines() if line.strip()]
    return module.group(1), lines, re.sub(r"\s+#.*$", "", shells[1].strip())


@pytest.fixture
def background() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The tour's background commands, each in a session of its own, stopped after the test."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in started:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.slow
def test_the_tour_runs_a_worker_and_the_server_and_the_inbox_answer_completes_the_run(
    tmp_path: Path, redis_client: redis.Redis, redis_url: str, background: list[subprocess.Popen[bytes]],
) -> None:
    """Each command of the tour, run as printed in a directory holding its flows.py (on the test's Redis
    and a free port), starts the run; the answer posted as /ui posts it is accepted; the run completes."""
    module, lines, last = _tour()
    (tmp_path / "flows.py").write_text(module)
    bin_dir = tmp_path / "bin"  # `parkway` is this checkout's, whatever the PATH holds
    bin_dir.mkdir()
    (bin_dir / "parkway").write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m parkway.cli \"$@\"\n")
    (bin_dir / "parkway").chmod(0o755)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARKWAY_")} | {
        "PYTHONPATH": str(ROOT), "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def local(line: str) -> str:
        return line.replace("redis://127.0.0.1:6379/0", redis_url).replace("8080", str(port))

    ran = []
    for line in map(local, lines):
        if line.startswith(SKIPPED):
            continue
        if line.startswith("export "):  # the shell's own expansion, $(...) included
            name = line.removeprefix("export ").split("=", 1)[0]
            got = subprocess.run(["bash", "-c", f'{line}; printf %s "${name}"'], env=env, cwd=tmp_path,
                                 capture_output=True, text=True, timeout=60, check=True)
            env[name] = got.stdout
        elif line.endswith("&"):
            background.append(subprocess.Popen(["bash", "-c", f"exec {line.removesuffix('&')}"], env=env,
                                               cwd=tmp_path, start_new_session=True))
        else:
            done = subprocess.run(["bash", "-c", line], env=env, cwd=tmp_path, capture_output=True, text=True,
                                  timeout=60)
            assert done.returncode == 0, (line, done.stderr)
        ran.append(line.split()[0] if not line.startswith("export ") else line.split("=")[0])
    assert ran.count("parkway") == 3 and len(background) == 2, ran  # worker, serve; run
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: answers(url), 30, "parkway serve to answer")

    # what the inbox page does: list the pending interrupts with the key, post the pressed option
    with httpx.Client(base_url=url, headers={"Authorization": "Bearer my-key"}, timeout=10) as api:
        items = wait_for(lambda: api.get("/v1/interrupts").json()["items"], 30, "the run to pause")
        (item,) = items
        assert item["runId"] == "expense-1" and item["request"]["question"] == "Pay 120 EUR to ACME?"
        answer = api.post(f"/v1/interrupts/{item['requestId']}/answer", json={"selected": "pay"})
        assert answer.status_code == 200, answer.text
        again = api.post(f"/v1/interrupts/{item['requestId']}/answer", json={"selected": "refuse"})
        assert again.status_code == 409, again.text

    def completed() -> str | None:
        shown = subprocess.run(["bash", "-c", local(last)], env=env, cwd=tmp_path, capture_output=True,
                               text=True, timeout=30)
        return shown.stdout if '"status": "completed"' in shown.stdout else None

    shown = wait_for(completed, 30, "the run to complete", interval=0.5)
    assert '"paid": true' in shown and '"to": "ACME"' in shown
    assert all(proc.poll() is None for proc in background), "the worker and the server still run"



def test_the_readme_tour_is_the_tour_page() -> None:
    """The README's tour gives the same flows.py and the same commands as the site's tour page, which
    the test above runs (the README's copy is found first)."""
    readme, page = ROOT / "README.md", ROOT / "docs" / "getting-started" / "tour.md"
    assert section(TOUR)[0] == readme
    assert _tour(readme) == _tour(page)
    assert len(readme.read_text().splitlines()) <= 200
