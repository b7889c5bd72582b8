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


def test_compose_up_starts_redis_and_a_worker_and_the_api_only_with_its_profile() -> None:
    """`docker compose up` needs only the secret and the Redis password: the API is a profile, and none of its
    variables is required at interpolation (an unset one would stop `up` without the profile too)."""
    services = _services()
    assert [name for name, s in services.items() if "profiles" not in s] == ["redis", "worker"]
    assert services["api"]["profiles"] == ["api"]
    assert all(":?" not in value for value in services["api"]["environment"].values()
               if "PARKWAY_SECRET" not in value)


def test_the_image_is_built_once_not_installed_at_every_start() -> None:
    """Worker and API run the image the Dockerfile builds (the package installed at build time, as a non-root
    user): no `pip install` at start, no bind mount of the source."""
    services = _services()
    for name in ("worker", "api"):
        s = services[name]
        assert s["build"] == "." and s["image"] == "parkway:local", name
        assert "volumes" not in s and "pip" not in " ".join(s["command"]), name
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install --no-cache-dir '.[http]'" in dockerfile and "\nUSER parkway\n" in dockerfile
