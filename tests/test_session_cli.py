"""`parkway session`: the tree with its parked branches, the events, send and resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from parkway import Caller, Parkway, Settings
from tests import session_flows as sf
from tests.conftest import SECRET, Harness

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PARKWAY_SECRET": SECRET, "PYTHONPATH": ROOT}
    env.pop("PARKWAY_REDIS_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "parkway.cli", "session", *args, "--redis-url", url],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=60,
    )


def test_session_show_draws_the_tree_with_its_parked_branches(redis_client: Any, redis_url: str) -> None:
    settings = Settings(redis_url=redis_url, secret=SECRET)
    with Parkway(settings) as pw:
        h = Harness("redis", pw, settings, redis_client)
        sid = pw.sessions.open(sf.asking, owner="ada", tenant="acme")
        one = pw.sessions.send(sid, "pay the invoice", caller=Caller("user", "ada", "acme"))
        h.run_jobs()
        pw.sessions.edit(sid, one.message_id, "pay it later")
        shown = _cli(redis_url, "show", sid)
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert any("pay the invoice" in line for line in lines)
        parked = [i for i, line in enumerate(lines) if "⏸ parked by" in line and "Which account?" in line]
        assert parked and "pay the invoice" in lines[parked[0] - 1]
        assert any(line.lstrip().startswith("* ") and "pay it later" in line for line in lines)  # the head
        as_json = json.loads(_cli(redis_url, "show", sid, "--json").stdout)
        by_id = {m["id"]: m for m in as_json["messages"]}
        assert by_id[one.message_id]["parkedBy"] and as_json["head"] != one.message_id
        events = [json.loads(line) for line in _cli(redis_url, "events", sid).stdout.splitlines()]
        assert [e["type"] for e in events][:3] == ["session.opened", "message.added", "run.dispatched"]
        # act from the CLI: a send on the head, then resume the parked branch's interrupt
        pw.sessions.switch(sid, one.message_id)
        refused = _cli(redis_url, "send", sid, "hello?")
        assert refused.returncode == 1 and "parked" in refused.stderr
        iid = pw.sessions.get(sid).parked_by(one.message_id)[0]
        resumed = _cli(redis_url, "resume", sid, iid, "--payload", '"ACC-9"')
        assert resumed.returncode == 0 and json.loads(resumed.stdout)["outcome"] == "resumed"
        again = _cli(redis_url, "resume", sid, iid, "--payload", '"ACC-9"')
        assert again.returncode == 3 and json.loads(again.stdout)["outcome"] == "already_cleared"
        missing = _cli(redis_url, "show", "no-such-session")
        assert missing.returncode == 1 and "no session" in missing.stderr


SID = "acme~cli-s1"
"""the session the CLI test opens as cli-s1 in tenant acme (a tenant's session ids are scoped by it)"""


def test_session_open_send_edit_and_switch_from_the_cli(redis_client: Any, redis_url: str) -> None:
    """`parkway session open|send|edit|switch` open a session, answer a message, branch it by an edit and
    switch the head back; each prints what it made, and a missing flag or word is one clear error."""
    settings = Settings(redis_url=redis_url, secret=SECRET)
    with Parkway(settings) as pw:
        h = Harness("redis", pw, settings, redis_client)
        opened = _cli(redis_url, "open", "cli-s1", "--agent", "tests.session_flows:echo", "--owner", "ada",
                      "--tenant", "acme")
        assert opened.returncode == 0, opened.stderr
        assert json.loads(opened.stdout) == {"sessionId": SID}  # scoped by its tenant
        assert pw.sessions.get(SID).public()["owner"] == "ada"
        first = json.loads(_cli(redis_url, "send", SID, "hello").stdout)
        h.run_jobs()
        edited = _cli(redis_url, "edit", SID, first["messageId"], "hello again")
        assert edited.returncode == 0, edited.stderr
        second = json.loads(edited.stdout)
        assert second["messageId"] != first["messageId"] and second["runId"]
        h.run_jobs()
        assert pw.sessions.get(SID).public()["head"] != first["messageId"]
        switched = _cli(redis_url, "switch", SID, first["messageId"])
        assert switched.returncode == 0, switched.stderr
        view = pw.sessions.get(SID)
        assert first["messageId"] in view.path(view.public()["head"])
        assert any(line.lstrip().startswith("* ") for line in switched.stdout.splitlines())
        lacking = _cli(redis_url, "open", "cli-s2", "--agent", "tests.session_flows:echo")
        assert lacking.returncode == 1 and "needs --owner, --tenant" in lacking.stderr
        short = _cli(redis_url, "edit", SID, first["messageId"])
        assert short.returncode == 1 and "usage: parkway session edit SESSION MESSAGE TEXT" in short.stderr
