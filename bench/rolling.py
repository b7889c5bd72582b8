"""Two versions side by side on one Redis across a rolling restart of the workers (invariant 15).

    python -m bench.rolling [OLD_COMMIT]      (default fb3799e, a commit before stored formats)

The old code is taken from the repository's history (``git archive``) and installed in a temporary
virtualenv (``--system-site-packages``: the same rq, redis-py, msgpack). On a private redis-server:
three old workers run; an old-code client starts runs and this code's client starts runs all along
(some waiting on an interrupt that is left to expire), answers the others, and the old client reads
back every run written so far; the workers are replaced one by one by this code's (start a new one,
then stop an old one warmly); once the last old worker has left RQ's registry the writers switch to
format 2 by themselves, and runs go on. At the end every run is checked: ``lost`` (not completed, or
not expired for those left to expire, within the deadline), ``misread`` (an output other than the one
its input and answer make, or a read by either version that failed), ``twice`` (its one side effect,
a ``use_step``, ran more than once). It prints the counts and the formats the runs were written in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from bench.env import ROOT, SECRET, RedisServer

FLOWS = '''
import os

import redis

from parkway import Workflow, use_interrupt, use_step

roll = Workflow("roll")


def _effect(n):
    r = redis.Redis.from_url(os.environ["ROLL_REDIS"])
    try:
        r.hincrby("roll:effects", n, 1)
    finally:
        r.close()
    return 1


@roll.node(start=True)
def ask(data):
    note = use_interrupt({"kind": "text", "question": "note?"}, id="note", ttl_ms=data.get("ttl"))
    use_step("effect", _effect, data["n"])
    return {"n": data["n"], "answer": note}
'''

OLD_CLIENT = '''
import json, sys
from parkway import Parkway, Settings
sys.path.insert(0, sys.argv[3])
import rollflows
mode, url = sys.argv[1], sys.argv[2]
with Parkway(Settings(redis_url=url, secret=sys.argv[4])) as pw:
    if mode == "start":
        ids = [pw.start(rollflows.roll, {"n": f"old{i}"}) for i in range(int(sys.argv[5]))]
        print(json.dumps(ids))
    else:
        bad = 0
        for run_id in json.loads(sys.stdin.read()):
            try:
                run = pw.get_run(run_id)
                bad += run.run_id != run_id or run.workflow != "roll"
            except Exception as exc:
                print("old read failed", run_id, repr(exc), file=sys.stderr)
                bad += 1
        print(json.dumps(bad))
'''


def old_install(commit: str, tmp: Path) -> Path:
    """The old code at ``commit``, installed in a virtualenv of its own; its python."""
    src = tmp / "old-src"
    src.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    venv = tmp / "old-venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    # installed as a path file in the virtualenv's own site-packages (ahead of the system's: no wheel is
    # built, this machine has no `wheel` package and nothing is downloaded)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "parkway_old.pth").write_text(f"{src}\n")
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([str(python), "-c", "import parkway; print(parkway.__file__)"], check=True,
                           capture_output=True, text=True, cwd=tmp, env=clean).stdout.strip()
    assert where.startswith(str(src)), f"the old virtualenv imports parkway from {where}"
    return python


class Rolling:
    def __init__(self, url: str, old_python: Path, flows_dir: Path) -> None:
        self.url, self.old_python, self.flows_dir = url, old_python, flows_dir
        self.env = {**os.environ, "PARKWAY_SECRET": SECRET, "PARKWAY_WORKFLOWS": "rollflows", "ROLL_REDIS": url,
                    "PARKWAY_EXPIRY_GRACE_MS": "500"}
        self.env.pop("PYTHONPATH", None)
        self.r = redis.Redis.from_url(url)
        self.workers: list[tuple[str, subprocess.Popen[bytes]]] = []

    def worker(self, version: str) -> None:
        python = str(self.old_python) if version == "old" else sys.executable
        env = dict(self.env) if version == "old" else {**self.env, "PYTHONPATH": str(ROOT)}
        before = self.r.scard("rq:workers")
        proc = subprocess.Popen([python, "-m", "parkway.cli", "worker", "--redis-url", self.url, "--path",
                                 str(self.flows_dir)], cwd=self.flows_dir, env=env, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while self.r.scard("rq:workers") <= before:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"the {version} worker did not start")
            time.sleep(0.05)
        self.workers.append((version, proc))

    def stop_one(self, version: str) -> None:
        for i, (v, proc) in enumerate(self.workers):
            if v == version:
                proc.terminate()  # RQ's warm shutdown: the job running finishes
                proc.wait(30)
                del self.workers[i]
                return

    def old_client(self, mode: str, payload: str = "", count: int = 0) -> Any:
        out = subprocess.run([str(self.old_python), "-c", OLD_CLIENT, mode, self.url, str(self.flows_dir), SECRET,
                              str(count)], input=payload, capture_output=True, text=True, check=True,
                             cwd=self.flows_dir, env=self.env)
        if out.stderr.strip():
            print(out.stderr.strip(), file=sys.stderr)
        return json.loads(out.stdout)

    def stop(self) -> None:
        for _, proc in self.workers:
            proc.terminate()
        for _, proc in self.workers:
            proc.wait(30)
        self.r.close()


def main(argv: list[str]) -> int:
    commit = argv[0] if argv else "fb3799e"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pw-rolling-") as name:
        tmp = Path(name)
        flows_dir = tmp / "flows"
        flows_dir.mkdir()
        (flows_dir / "rollflows.py").write_text(FLOWS)
        old_python = old_install(commit, tmp)
        server = RedisServer().start()
        try:
            result = _run(Rolling(server.url, old_python, flows_dir))
        finally:
            server.stop()
    result["seconds"] = round(time.monotonic() - started, 1)
    result["old"] = commit
    print(json.dumps(result, indent=1))
    return 0 if result["lost"] == result["misread"] == result["twice"] == 0 else 1


def _run(roll: Rolling) -> dict[str, Any]:
    sys.path.insert(0, str(roll.flows_dir))
    os.environ["ROLL_REDIS"] = roll.url
    import rollflows  # type: ignore[import-not-found]

    from parkway import Parkway, Settings

    answered: dict[str, str] = {}
    expiring: set[str] = set()
    pw = Parkway(Settings(redis_url=roll.url, secret=SECRET, workflows="rollflows"))
    counter = [0]
    events: list[str] = []
    formats = {"1": 0}

    def drive(seconds: float) -> None:
        """Start runs (one in five to expire unanswered) and answer the parked ones, for ``seconds``."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            n = counter[0] = counter[0] + 1
            if n % 5 == 0:
                run_id = pw.start(rollflows.roll, {"n": f"new{n}", "ttl": 1500})
                expiring.add(run_id)
            else:
                run_id = pw.start(rollflows.roll, {"n": f"new{n}"})
                answered.setdefault(run_id, "")
            fmt = (roll.r.hget(f"pw:{{{run_id}}}:run", "fmt") or b"1").decode()  # as it was created
            formats[fmt] = formats.get(fmt, 0) + 1
            answer_parked()
            time.sleep(0.02)

    def answer_parked() -> None:
        for item in pw.list_interrupts(include_tokens=True, limit=200).items:
            if item.run_id in expiring or item.resume_token is None:
                continue
            outcome = pw.resume(item.resume_token, value=f"a-{item.run_id}")
            if outcome.accepted:
                answered[item.run_id] = f"a-{item.run_id}"

    try:
        for _ in range(3):
            roll.worker("old")
        old_started = roll.old_client("start", count=20)
        answered.update({run_id: "" for run_id in old_started})
        formats["1"] += len(old_started)  # the old code knows no formats: what it writes is format 1
        drive(4)
        misread_old = roll.old_client("read", json.dumps(sorted(set(answered) | expiring)))
        events.append(f"formats before the roll: writes {pw.formats().writes}")
        for i in range(3):
            roll.worker("new")
            drive(1.5)
            roll.stop_one("old")
            events.append(f"worker {i + 1} replaced: writes {pw.formats().writes}")
            drive(1.5)
        deadline = time.monotonic() + 30
        while pw.formats().writes != 2 and time.monotonic() < deadline:
            drive(0.5)
        switched_after = round(30 - (deadline - time.monotonic()), 1)
        drive(8)
        # the control: what the old code makes of a format-2 run (why none may reach it): not counted
        newest = [r for r in answered if roll.r.hget(f"pw:{{{r}}}:run", "fmt") == b"2"][:1]
        control = roll.old_client("read", json.dumps(newest)) if newest else None
        events.append(f"the old code reading a format-2 run after the roll (a control): {control} failed")
        return _tally(pw, roll, answered, expiring, misread_old, events, switched_after, answer_parked) | {
            "written_in_format": formats}
    finally:
        pw.close()
        roll.stop()


def _tally(pw: Any, roll: Rolling, answered: dict[str, str], expiring: set[str], misread_old: int,
           events: list[str], switched_after: float, answer_parked: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        answer_parked()
        runs = {r: pw.get_run(r) for r in (*answered, *expiring)}
        if all(runs[r].status.value == "completed" for r in answered) and all(
                runs[r].status.value == "expired" for r in expiring):
            break
        time.sleep(0.5)
    effects = {k.decode(): int(v) for k, v in roll.r.hgetall("roll:effects").items()}
    lost = misread = 0
    for run_id in answered:
        run = pw.get_run(run_id)
        if run.status.value != "completed":
            lost += 1
            continue
        n = (run.input or {}).get("n")
        misread += run.output != {"n": n, "answer": f"a-{run_id}"}
    lost += sum(pw.get_run(r).status.value != "expired" for r in expiring)
    twice = sum(1 for v in effects.values() if v > 1)
    return {
        "runs": len(answered) + len(expiring), "answered": len(answered), "expired": len(expiring),
        "lost": lost, "misread": misread + misread_old, "twice": twice,
        "switch_to_format_2_after_s": switched_after, "steps": events,
    }


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
