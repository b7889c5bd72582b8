"""The OpenAPI document the app serves, compared with the one main served at db96a82 (before the HTTP
surface became routers per resource): every path, method, parameter and schema kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).with_name("openapi_db96a82.json")
CHANGED: dict[str, str] = {
    "components.schemas.InterruptRequest.properties.contractRef: gone": "it was wrong: where a contract is defined "
    "(module:attribute) is kept for the resuming client and never shown (InterruptRequest.stored)",
    "paths./slack/interactions: new": "an addition: Slack's interactivity endpoint (parkway.http.routes.slack)",
    "components.schemas.InterruptRequest.properties.kind.enum": "added: the kinds registered since (the enum is "
    "the registry's list, parkway.runtime.kinds; the four of db96a82 first, in their order)",
    "components.schemas.InterruptRequest.properties.spec": "added: a kind's own settings (a datetime's bounds and "
    "zone), checked and normalised by its kind; absent from the requests of the four kinds of db96a82",
    "components.schemas.AnswerWidget": "added: the body of GET /v1/interrupts/{request_id}/widget",
    "paths./v1/interrupts/{request_id}/widget": "added: how the inbox page asks for an answer, from the kind",
    "components.schemas.ResumeInput.description": "prose only: it names the docs page the README's text moved to",
}
"""what differs on purpose, by where (``paths./v1/runs.get.parameters``): why"""


def _document() -> dict[str, Any]:
    from parkway import Parkway
    from parkway.http.app import create_app

    with Parkway() as pw:
        return create_app(pw, {}).openapi()


def _differences(old: Any, new: Any, where: str = "") -> list[str]:
    """Where ``new`` differs from ``old``, down to each member (parameters compared by name and place)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = [f"{where}.{k}: gone" for k in old if k not in new] + [f"{where}.{k}: new" for k in new if k not in old]
        for key in old.keys() & new.keys():
            out += _differences(old[key], new[key], f"{where}.{key}".lstrip("."))
        return out
    if where.endswith(".parameters") and isinstance(old, list) and isinstance(new, list):
        return _differences({f"{p['in']}:{p['name']}": p for p in old}, {f"{p['in']}:{p['name']}": p for p in new},
                            where) + ([f"{where}: order"] if [p["name"] for p in old] != [p["name"] for p in new]
                                      else [])
    return [] if old == new else [f"{where}: {json.dumps(old)[:200]} -> {json.dumps(new)[:200]}"]


def test_every_path_method_parameter_and_schema_is_kept() -> None:
    """Every path, method, parameter and schema of the document served at db96a82 is served the same
    (what differs on purpose is named in CHANGED, with why)."""
    old = json.loads(SNAPSHOT.read_text())
    found = [d for d in _differences(old, _document()) if not any(d.startswith(k) for k in CHANGED)]
    assert found == [], "\n".join(sorted(found))


def test_a_changed_parameter_is_a_difference() -> None:
    """The comparison finds a parameter whose schema changed, and one that is gone."""
    old = json.loads(SNAPSHOT.read_text())
    new = json.loads(SNAPSHOT.read_text())
    listing = new["paths"]["/v1/interrupts"]["get"]["parameters"]
    listing[3]["schema"]["maximum"] = 999
    del listing[0]
    found = _differences(old, new)
    assert len(found) == 3 and any("maximum" in d for d in found), found
