"""docs/benchmarks.md's summary cannot drift from the results files kept in the repository, and what the
benchmarks write into those files is what the summary is rendered from."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from hack.bench import doc as benchdoc
from hack.bench.peer import summary
from hack.bench.webhook import Run, summarize


def test_the_page_summary_is_the_rendering_of_the_committed_results() -> None:
    assert benchdoc.current_block() == benchdoc.block(benchdoc.rendered()), (
        "docs/benchmarks.md's summary differs from hack/bench/results/*.json: run python -m hack.bench.doc")


@pytest.mark.parametrize("name", ["peer", "webhook", "scale", "gating"])
def test_each_results_file_says_which_run_it_holds(name: str) -> None:
    data = benchdoc.load(name)
    assert data["benchmark"] == name
    assert all(data[key] for key in ("date", "commit", "machine", "rounds"))
    if data["provenance"] == "transcribed":  # written by hand from a run's record, before the benchmark kept files
        assert all(data[key] for key in ("transcribed_from", "transcription_note"))
    else:
        assert data["provenance"] == "measured"
        assert data["command"].startswith(f"python -m hack.bench.{name}")


def raw_peer_results() -> dict[str, Any]:
    """Two rounds at defaults, W = 1000 only: Go 200 and 202 s, ours 4 and 6 s."""
    def run(kind: str, round_: int, ttac: float, status_writes: int) -> dict[str, Any]:
        writes = {"create pods": 64, "create services": 1, "update mpijobs/status": status_writes, "delete pods": 64}
        return {"operator": kind, "setting": "defaults", "round": round_, "idle_rss_kb": 50 * 1024,
                "b3": [{"workers": 1000, "ttac": ttac, "launcher": ttac, "cpu": 1.0, "rss_kb": 60 * 1024,
                        "cpu_percent": {"kube-apiserver": 100.0, "operator": 20.0}}],
                "b4": [], "b5": {"writes": writes, "user_agents": {f"{kind}-agent": 133}}}

    meta = {"date": "2026-12-05 10:00 UTC", "commit": "abc1234", "rounds": 2, "settings": ["defaults"],
            "sizes": {"defaults": [1000]}, "b4_rates": [], "b4_settings": [], "b4_jobs": 200, "b4_workers": 4,
            "b4_wait": 30.0, "b5_workers": 64, "peer_version": "v0.8.2", "nodes": 4, "pods_per_node": 1000,
            "our_default_qps": 0.0, "our_default_burst": 0, "flags": {"defaults": {"go": "", "ours": ""}},
            "machine": "2 cores, Python 3.11.7", "argv": [], "notes": []}
    b0 = [{"round": r, "rate": 500.0, "scheduled_rate": 250.0} for r in (0, 1)]
    runs = [run("go", 0, 200.0, 15), run("ours", 0, 4.0, 12), run("ours", 1, 6.0, 12), run("go", 1, 202.0, 15)]
    return {"meta": meta, "b0": b0, "runs": runs}


def test_a_measured_peer_run_fills_the_summary() -> None:
    figures = json.loads(json.dumps(summary.summarize(raw_peer_results(), "abc1234", "python -m hack.bench.peer", [])))
    lines = benchdoc.peer_lines(figures)
    assert "| B3 time to all 1,000 workers created, defaults (s) | 201.000 (200.000-202.000) | 5.000 (4.000-6.000) | " \
        "41.8x faster (33.7-50.0) | >= 20x faster than Go: met |" in lines
    # 64 + 1 + 12 writes before the cleanup: one over the budget.
    assert "| B5 API writes for one 64-worker job, creation to Succeeded, defaults | 80 | 77 | " \
        "0.96x Go's | <= W + 12 = 76: **missed** |" in lines
    assert "| B3 time to all 1,000 workers created, raised limits (s) | - | - | - | " \
        ">= 5x faster than Go: not measured |" in lines
    assert benchdoc.floor_line(figures) == (
        "API server yardstick of the same run (B0: a raw client, 32 creates in flight, no operator): 500 "
        "scheduling-gated pod creates/s (C_max), 250 creates/s of the pods a job really creates, bound and "
        "started meanwhile (C_sched). At defaults ours created all 1,000 workers in 1.25x W / C_sched (1.00-1.50 "
        "paired by round), the Go operator in 50.25x. Target within 1.5x of the floor: met against C_sched, "
        "**missed** against the gated C_max (2.50x).")


def test_a_measured_webhook_run_fills_the_summary() -> None:
    cpu = {"trivial": 100.0, "mutate": 125.0, "validate": 200.0}
    p99 = {"trivial": 0.4, "mutate": 0.5, "validate": 1.2}
    runs = [Run(endpoint, 20, concurrency, round_, 1e6 / cpu[endpoint], 0.3, p99[endpoint] * concurrency, cpu[endpoint])
            for round_ in (0, 1) for concurrency in (1, 16) for endpoint in cpu]
    args = argparse.Namespace(rounds=2, sizes=[20], concurrency=[1, 16], duration=8.0, warmup=2.0, log_level="info")
    memory = {"idle_mib": 50.0, "end_mib": 52.0, "peak_mib": 55.0, "trivial_idle_mib": 40.0}
    figures = json.loads(json.dumps(summarize(runs, memory, args, "2026-12-05 10:00 UTC", ["--rounds", "2"])))
    assert figures["command"] == "python -m hack.bench.webhook --rounds 2"
    assert benchdoc.webhook_lines(figures) == [
        "| B2 webhook requests/s per core, 20 KB MPIJob, 16 connections: mutate / validate | no webhook | "
        "8,000 / 5,000 | 80.0 % / 50.0 % of a do-nothing "
        "handler's 10,000/s | reported, no target |",
        "| B2 webhook p99 at 1 connection, 20 KB: mutate / validate (ms) | no webhook | 0.50 / "
        "1.20 | do-nothing handler: 0.40 | <= 1 ms: **missed** (validate) |",
        "| B2 webhook p99 at 16 connections, 20 KB: mutate / validate (ms) | no webhook | 8.00 / "
        "19.20 | do-nothing handler: 6.40 | <= 10 ms: **missed** (validate) |",
        "| B2 webhook RSS idle / peak over the runs | no webhook | 50.0 / 55.0 MiB | | "
        "peak < 512 MiB (its memory limit): met |",
    ]


def test_rewrite_replaces_the_generated_part_only(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"# Benchmarks\n\nbefore\n\n{benchdoc.START}\nstale\n{benchdoc.END}\n\nafter\n", encoding="utf-8")
    assert benchdoc.rewrite(doc)
    text = doc.read_text(encoding="utf-8")
    assert text == f"# Benchmarks\n\nbefore\n\n{benchdoc.block(benchdoc.rendered())}\n\nafter\n"
    assert not benchdoc.rewrite(doc)  # a second rendering changes nothing
