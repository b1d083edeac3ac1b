"""The peer benchmark's results kept in the repository: hack/bench/results/peer.json holds the figures of the
latest run (what docs/benchmarks.md's summary is rendered from, by hack/bench/doc.py), peer-rounds.json the
per-round measurements they and the plots come from."""

from __future__ import annotations

from typing import Any

from hack.bench.doc import REPO_ROOT, RESULTS
from hack.bench.peer import report

PEER = RESULTS / "peer.json"
ROUNDS_FILE = "hack/bench/results/peer-rounds.json"
ROUNDS = REPO_ROOT / ROUNDS_FILE


def summarize(results: dict[str, Any], commit: str, command: str, plots: list[str]) -> dict[str, Any]:
    """The figures of one run (or of merged runs) as peer.json keeps them."""
    meta = results["meta"]
    return {
        "benchmark": "peer",
        "provenance": "measured",
        "command": command,
        "date": meta["date"],
        "commit": commit,
        "machine": meta["machine"],
        "peer_version": meta["peer_version"],
        "rounds": meta["rounds"],
        "nodes": meta["nodes"],
        "pods_per_node": meta["pods_per_node"],
        "flags": meta["flags"],
        "our_default_limit": limits(meta),
        "b4": {"jobs": meta["b4_jobs"], "workers": meta["b4_workers"], "wait_s": meta.get("b4_wait", 0)},
        "rows": report.rows(results),
        "floors": report.floors(results),
        "b5_writes": report.b5_writes(results),
        "plots": plots,
        "rounds_file": ROUNDS_FILE,
        "notes": list(meta.get("notes", [])),
    }


def limits(meta: dict[str, Any]) -> str:
    """Our client-side limit with no flags, as read from reconciler/options.py at run time."""
    if not meta["our_default_qps"]:
        return "none (no client-side rate limit)"
    return f"{meta['our_default_qps']:g} QPS / {meta['our_default_burst']} burst"


def full_text(summary: dict[str, Any]) -> str:
    """Everything peer.json holds, as Markdown: the ratio table, the floors, B5's writes."""
    parts = [report.table_text(summary["rows"]), "", *[f"- {line}" for line in report.floor_text(summary["floors"])],
             "", *report.b5_text(summary["b5_writes"])]
    return "\n".join(parts)
