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
class Target:
    """One row of the targets table: ``key`` names it in ``bench.plan.TARGETS`` (or, ``earlier``, in
    ``EARLIER_TARGETS``), ``miss`` says what meeting it would take (printed when it is missed)."""

    key: str
    what: str
    value: str
    met: bool | None
    miss: str = ""
    earlier: bool = False


@dataclass
class Section:
    key: str
    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)  # markdown only (method, breakdowns)
    targets: list[Target] = field(default_factory=list)


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
    current, earlier = target_rows(sections)
    for title, rows in (("Targets", current), ("Earlier targets (issue 9)", earlier)):
        if rows:
            print("\n" + title)
            print(text_table(["target", "measured", "met?"], [[t.what, t.value, verdict(t).upper()] for t in rows]))


def verdict(t: Target) -> str:
    return "not measured" if t.met is None else "met" if t.met else "missed"


def target_rows(sections: list[Section]) -> tuple[list[Target], list[Target]]:
    """The current targets in bench.plan.TARGETS' order, one row each (a target whose figure did not run
    reads "not measured"), and the earlier issue's rows its figures reported."""
    from .figures import FIGURES
    from .plan import EARLIER_TARGETS, TARGET_FIGURES, TARGET_LABELS, TARGETS

    got = [t for s in sections for t in s.targets]
    current: list[Target] = []
    for key in TARGETS:
        mine = [t for t in got if t.key == key and not t.earlier]
        figure = TARGET_FIGURES[key]
        current += mine or [
            Target(key, TARGET_LABELS[key], f"no result from figure {FIGURES.index(figure) + 1} ({figure})", None)
        ]
    order = list(EARLIER_TARGETS)
    earlier = sorted((t for t in got if t.earlier), key=lambda t: order.index(t.key) if t.key in order else len(order))
    return current, earlier


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
    current, earlier = target_rows(sections)
    out += ["## Targets", "", "Issue 22's targets, and issue 23's start times.", ""]
    out += targets_md(current)
    if earlier:
        out += [
            "### Earlier targets (issue 9)",
            "",
            "Issue 9's targets that issue 22 did not replace (its Redis CPU ≤ 0.5 ms, total CPU ≤ 1× "
            "LangGraph + InMemorySaver, resume p99 < 3× and ≤ 1,024 B per parked run are replaced by the rows "
            "above).",
            "",
            *targets_md(earlier),
        ]
    for s in sections:
        out += [f"## {s.title}", "", md_table(s.headers, s.rows) if s.rows else "_no result_", ""]
        out += [f"- {n}" for n in s.notes]
        if s.notes:
            out.append("")
        out += [*(p + "\n" for p in s.extra)]
    path.write_text("\n".join(out).rstrip() + "\n")


def targets_md(rows: list[Target]) -> list[str]:
    """A targets table, then what each missed row would take."""
    out = [md_table(["target", "measured (median)", "met?"], [[t.what, t.value, verdict(t)] for t in rows]), ""]
    missed = [t for t in rows if t.met is False]
    if missed:
        out += ["What each miss would take:", ""]
        out += [f"- *{t.what}*: {t.miss or 'not yet worked out'}" for t in missed]
        out.append("")
    return out
