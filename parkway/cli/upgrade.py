"""Rolling upgrades: ``parkway upgrade --check`` (adapters/redis/formats.py says the rule)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .common import as_json, open_client
from .parsing import Subcommands, subcommand

if TYPE_CHECKING:
    from ..adapters.redis.formats import Decision

WAITING = 3
"""the exit status of ``upgrade --check`` while the newest format waits on a live process"""


def add_upgrade(sub: Subcommands) -> None:
    c = subcommand(
        sub,
        "upgrade",
        "say whether the deployment is mixed, which stored formats each live process reads, and what\n"
        "the switch to the newest format waits on",
        cmd_upgrade,
        "Every worker, server and writing client announces the stored formats it reads (refreshed every\n"
        "5 s, lapsing 30 s after its last refresh); a worker RQ registered that announces nothing (a\n"
        "version before formats) counts as reading format 1 only. Writers create records in the newest\n"
        "format every live process reads, and switch once the last older reader is gone.\n"
        "exit status: 0 ready (every live process reads the newest format), 3 waiting, 1 error",
    )
    c.add_argument("--check", action="store_true", required=True,
                   help="report, change nothing (the only mode: the switch is automatic)")
    c.add_argument("--json", action="store_true", help="print one JSON object (camelCase)")


def cmd_upgrade(args: argparse.Namespace) -> int:
    with open_client(args) as pw:
        decision = pw.formats()
    if args.json:
        print(as_json(_as_dict(decision)))
    else:
        print("\n".join(describe(decision)))
    return 0 if decision.writes == decision.newest else WAITING


def describe(decision: Decision) -> list[str]:
    """What ``upgrade --check`` and ``parkway status`` say of the formats."""
    lines = [
        f"writes stored format {decision.writes} (newest {decision.newest}): {decision.reason()}",
        f"deployment {'mixed' if decision.mixed else 'uniform'}: {len(decision.readers)} live process(es)",
    ]
    for r in decision.readers:
        seen = "seen in RQ's worker registry, announces nothing" if not r.announced else "announced"
        lines.append(f"  {r.process}  {r.role}  reads {','.join(map(str, r.reads))}  ({seen})")
    return lines


def _as_dict(decision: Decision) -> dict[str, object]:
    return {
        "writes": decision.writes,
        "newest": decision.newest,
        "mixed": decision.mixed,
        "ready": decision.writes == decision.newest,
        "reason": decision.reason(),
        "processes": [{"process": r.process, "role": r.role, "reads": list(r.reads), "announced": r.announced}
                      for r in decision.readers],
        "waitingOn": [r.process for r in decision.waiting_on],
    }
