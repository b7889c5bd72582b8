"""The production shape in compose.yaml keeps Redis private."""

from __future__ import annotations

from typing import Any

import yaml

from tests.procs import ROOT


def _services() -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    return services


def test_redis_is_published_on_no_interface_and_needs_a_password() -> None:
    """Redis stays on the compose network (no published port) and starts with a password that
    every parkway URL carries: whoever reaches parkway's Redis can start, answer and cancel runs."""
    services = _services()
    redis = services["redis"]
    assert "ports" not in redis
    assert "--requirepass" in " ".join(redis["command"])
    assert "PARKWAY_REDIS_PASSWORD:?" in redis["environment"]["REDIS_PASSWORD"]  # no default: refused unset
    urls = [s["environment"]["PARKWAY_REDIS_URL"] for s in services.values() if "PARKWAY_REDIS_URL" in
            s.get("environment", {})]
    assert urls and all(u.startswith("redis://:${PARKWAY_REDIS_PASSWORD}@redis:") for u in urls)


def test_the_api_service_names_the_workflows_it_may_import() -> None:
    """`parkway serve` imports only listed modules: the compose API service must list them."""
    assert "PARKWAY_WORKFLOWS" in _services()["api"]["environment"]
