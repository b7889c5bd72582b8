"""What the benchmark prints and writes: a figure's Section, its cells, the tables, bench/RESULTS.md.

Every figure builds one ``Section``; ``write_results`` turns the list of them, with the machine
facts, into the markdown file, and ``text_table`` into the console report.
"""

from __future__ import annotations

import datetime as dt
import shutil
import statistics
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .env import ROOT

if TYPE_CHECKING:
    from .plan import Plan


@dataclass
class Section:
    key: str
    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)  # markdown only (method, breakdowns)
    targets: list[tuple[str, str, bool | None]] = field(default_factory=list)  # (what, value, met)


def med(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def fmt(value: float, digits: int = 1) -> str:
    if value != value:  # nan
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def cell(values: Sequence[float], digits: int = 1) -> str:
    """median (min-max) over runs; a single value alone."""
    values = [v for v in values if v == v]
    if not values:
        return "-"
    if len(values) == 1:
        return fmt(values[0], digits)
    return f"{fmt(med(values), digits)} ({fmt(min(values), digits)}–{fmt(max(values), digits)})"


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def text_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False))  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    esc = lambda c: c.replace("|", "\\|")  # noqa: E731
    out = ["| " + " | ".join(esc(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def print_summary(sections: list[Section]) -> None:
    """The console report once every figure has run: each figure's table and notes, then the targets."""
    print("=" * 100)
    for s in sections:
        print("\n" + s.title + "\n" + text_table(s.headers, s.rows))
        for n in s.notes:
            print("  " + n)
    targets = [t for s in sections for t in s.targets]
    if targets:
        print("\nTargets")
        print(text_table(["target", "measured", "met?"], [[w, v, "met" if ok else "MISSED"] for w, v, ok in targets]))


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3]) + " (1, 5, 15 min)"
    except OSError:
        return "unknown"


def source_digest() -> str:
    """A short hash of parkway's sources as they are on disk now (tracked or not)."""
    import hashlib

    h = hashlib.sha256()
    folder = ROOT / "parkway"
    for path in sorted(p for p in folder.rglob("*") if p.suffix in (".py", ".lua") and p.is_file()):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def git_revision() -> str:
    if shutil.which("git") is None:
        return "unknown"
    try:
        rev = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        return rev or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def write_results(
    path: Path, sections: list[Section], facts: dict[str, str], command: str, started: float, plan: Plan
) -> None:
    out = [
        "# parkway benchmark results",
        "",
        f"Written by `{command}` on {dt.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')} "
        f"in {(time.time() - started) / 60:.1f} minutes"
        + (
            " (**--quick**: fewer cycles and smaller sizes; run without --quick for the issue's figures)"
            if plan.quick
            else ""
        )
        + ".",
        "Cells are the median over runs with (min–max); ratios are taken within a run, then summarized. "
        "The machine's speed drifts 15–30% between runs: compare figures from the same file, and ratios "
        "rather than absolute numbers.",
        "",
        "## Machine",
        "",
        md_table(["what", "value"], [[k, v] for k, v in facts.items()]),
        "",
    ]
    targets = [t for s in sections for t in s.targets]
    if targets:
        out += [
            "## Targets",
            "",
            md_table(
                ["target", "measured (median)", "met?"], [[w, v, "met" if ok else "missed"] for w, v, ok in targets]
            ),
            "",
        ]
    for s in sections:
        out += [f"## {s.title}", "", md_table(s.headers, s.rows) if s.rows else "_no result_", ""]
        out += [f"- {n}" for n in s.notes]
        if s.notes:
            out.append("")
        out += [*(p + "\n" for p in s.extra)]
    path.write_text("\n".join(out).rstrip() + "\n")
