"""What the benchmark report says about its targets, and the scaling figure's replica rows.

Benchmarks gate nothing on a time; these check the report's shape (every target of issue 22
listed, met or missed, each miss with what it would take; issue 9's rows under their own
heading; figure 3's commands by script before and after) and that the scaling bench's
WAIT configurations really wait, small, on real processes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import scaling
from bench.figures import rediscost
from bench.plan import EARLIER_TARGETS, TARGET_LABELS, TARGETS, Plan
from bench.report import Section, Target, target_rows, write_results


def _plan() -> Plan:
    return Plan(quick=True, runs=1, cycles=1, peer_cycles=1, window=1, mode="poll", latency_n=1, cost_n=1,
                cost_sample=1, weight_workers=1, weight_executor=1, weight_pipelined=None, listing_sizes=[1000],
                listing_queries=1, worker_counts=[1], profile_seconds=1, pg="")


def test_the_targets_are_issue_22s_rows_issue_36s_two_and_issue_23s_start_times_in_order() -> None:
    assert list(TARGETS) == ["redis_cpu_ms", "lua_commands", "weight", "latency_p50", "latency_p99", "send_ratio",
                             "beyond_text", "cpu_memory", "redis_floor", "cpu_postgres", "start parkway --help",
                             "start parkway interrupts"]
    assert (TARGETS["redis_floor"], TARGETS["cpu_postgres"]) == (1.0, 0.3)
    assert (TARGETS["redis_cpu_ms"], TARGETS["lua_commands"], TARGETS["weight"]) == (1.0, 70.0, 1024.0)
    assert (TARGETS["latency_p50"], TARGETS["latency_p99"], TARGETS["send_ratio"]) == (3.0, 3.0, 1.5)
    assert (TARGETS["beyond_text"], TARGETS["cpu_memory"]) == (1024.0, 0.8)
    assert set(EARLIER_TARGETS) == {"cost", "cpu_sqlite", "listing"}


def test_every_target_gets_a_row_and_every_miss_says_what_it_would_take(tmp_path: Path) -> None:
    sec = Section("latency", "2. Resume latency", ["measured"], rows=[["x"]])
    sec.targets += [
        Target("latency_p50", TARGET_LABELS["latency_p50"], "4.00×", False, "one round trip fewer"),
        Target("latency_p99", TARGET_LABELS["latency_p99"], "2.00×", True, "unused"),
        Target("cost", "cycle cost ≤ 1.25× the floor", "1.40×", False, "the same cuts", earlier=True),
    ]
    current, earlier = target_rows([sec])
    assert [t.key for t in current] == list(TARGETS)
    assert [t.key for t in earlier] == ["cost"]
    unmeasured = next(t for t in current if t.key == "redis_cpu_ms")
    assert unmeasured.met is None and "figure 1 (cycles)" in unmeasured.value
    out = tmp_path / "RESULTS.md"
    write_results(out, [sec], {"cpu": "test"}, "python -m bench", 0.0, _plan())
    text = out.read_text()
    targets = text[text.index("## Targets"):text.index("### Earlier targets (issue 9)")]
    assert f"| {TARGET_LABELS['latency_p50']} | 4.00× | missed |" in targets
    assert f"| {TARGET_LABELS['latency_p99']} | 2.00× | met |" in targets
    assert f"| {TARGET_LABELS['redis_cpu_ms']} | no result from figure 1 (cycles) | not measured |" in targets
    assert f"- *{TARGET_LABELS['latency_p50']}*: one round trip fewer" in targets
    assert "unused" not in text
    earlier_part = text[text.index("### Earlier targets (issue 9)"):text.index("## 2. Resume latency")]
    assert "| cycle cost ≤ 1.25× the floor | 1.40× | missed |" in earlier_part
    assert "- *cycle cost ≤ 1.25× the floor*: the same cuts" in earlier_part


def test_figure_3_prints_each_scripts_commands_before_and_now_and_the_lua_target() -> None:
    before = json.loads(rediscost.BEFORE.read_text())
    assert before["commit"].startswith("150d0cb") and before["command"] == "python -m bench --only rediscost --runs 1"
    run = {"monitor_by_script_per_cycle": {
        "resume": {"(calls)": 1.0, "hset": 4.0, "xadd": 3.0},
        "advance": {"(calls)": 2.0, "hset": 10.0, "pexpire": 2.0},
        "other": {"(calls)": 2.0, "rpush": 2.0},
    }}
    sec = Section("rediscost", "3.", ["per cycle"])
    rediscost.by_script(sec, [run])
    table = next(e for e in sec.extra if "by script, before (150d0cb)" in e)
    resume_before = sum(v for k, v in before["by_script"]["resume"].items() if k != "(calls)")
    assert f"| resume | 1 | {resume_before:.1f} | 1 | 7.0 | hset 4, xadd 3 |" in table
    assert "| **all of parkway's scripts** |" in table and "| 3 | 19.0 |" in table  # RQ's own scripts left out
    (lua,) = sec.targets
    assert (lua.key, lua.value, lua.met) == ("lua_commands", "19.0", True)
    run["monitor_by_script_per_cycle"]["resume"]["hset"] = 60.0
    sec = Section("rediscost", "3.", ["per cycle"])
    rediscost.by_script(sec, [run])
    (lua,) = sec.targets
    assert lua.met is False and "resume (63)" in lua.miss and "HSET 70" in lua.miss


def test_a_scaling_configuration_names_shards_workers_and_replica_acks() -> None:
    assert scaling.parse_config("1x4") == (1, 4, None)
    assert scaling.parse_config("2x1") == (2, 1, None)
    assert scaling.parse_config("1x1+wait1") == (1, 1, 1)
    with pytest.raises(SystemExit):
        scaling.parse_config("2x1+wait1")


@pytest.mark.slow
def test_the_wait_configurations_wait_for_the_replica_only_when_asked(tmp_path: Path) -> None:
    rows = {acks: scaling.measure(tmp_path, 1, 1, 20, 4, warmup=4, acks=acks, ack_ms=2000) for acks in (0, 1)}
    assert rows[0]["waits_per_cycle"] == 0
    assert rows[1]["waits_per_cycle"] >= 1
    for row in rows.values():
        assert row["cycles"] == 20 and row["replica_cpu_ms_per_cycle"] >= 0 and row["resume_ms_p50"] > 0


def test_the_paper_extrapolation_is_the_arithmetic_of_its_inputs() -> None:
    """Figure 1's extrapolation to 100 worker machines (issue 24) is computed from the run's medians:
    1 ms of Redis CPU and 4 ms of worker CPU per cycle make 1,000 and 250 cycles/s per core, so 400
    worker cores run 100,000 cycles/s on 100 Redis primaries."""
    from bench.figures.cycles import extrapolation

    text = extrapolation(1.0, 4.0)
    assert "about 1,000 cycles/s" in text and "about 250" in text and "4.0 busy worker cores" in text
    assert "about 100,000 cycles/s" in text and "about 100 Redis primaries" in text
    assert "about 200 Redis primaries" in extrapolation(2.0, 4.0)
