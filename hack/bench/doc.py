"""docs/benchmarks.md's summary, rendered from the latest results files kept in the repository.

``make bench-peer`` writes hack/bench/results/peer.json, ``make bench-webhook`` webhook.json,
``python -m hack.bench.scale`` scale.json and ``make bench-gating`` gating.json (the figures of their latest run, with
its date and commit); each then rewrites the summary between the page's markers from the files.
``python -m hack.bench.doc`` renders it again from the files as they are; ``--check`` only says whether the page
matches them (exit 1 if not). A unit test checks the same, so the page cannot drift.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hack.bench.figures import Figure, show, source_line
from hack.bench.scale.summary import backends_lines, floors_lines, scale_lines

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS = REPO_ROOT / "hack" / "bench" / "results"
DOC = REPO_ROOT / "docs" / "benchmarks.md"
START = "<!-- generated: summary (python -m hack.bench.doc, from hack/bench/results/*.json; do not edit) -->"
END = "<!-- end: summary -->"

def rounded(value: Any, places: int = 6) -> Any:
    """``value`` with every float rounded (results files stay small and their diffs readable)."""
    if isinstance(value, float):
        return round(value, places)
    if isinstance(value, dict):
        return {k: rounded(v, places) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, places) for v in value]
    return value


def write_json(path: Path, data: dict[str, Any], places: int = 6) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rounded(data, places), indent=1, ensure_ascii=False) + "\n")


def current_commit() -> str:
    """The checkout's short commit, ``-dirty`` when it has uncommitted changes; ``unknown`` without git."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=7"], cwd=REPO_ROOT,
                             capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


# ---- the summary table


def median(row: dict[str, Any], side: str) -> float | None:
    figure = row.get(side)
    return None if figure is None else float(figure["median"])


@dataclass(frozen=True)
class Target:
    """A target of spec/performance.md (or of the issue that set it): its text, and whether a row meets it
    (None: a figure it needs was not measured)."""

    text: str
    met: Callable[[dict[str, Any]], bool | None]


def threshold(side: str, limit: float, text: str, above: bool) -> Target:
    def met(row: dict[str, Any]) -> bool | None:
        value = median(row, side)
        return None if value is None else (value >= limit if above else value <= limit)

    return Target(text, met)


def sustains_twice_go(row: dict[str, Any]) -> bool | None:
    go, ours = median(row, "go"), median(row, "ours")
    return None if go is None or ours is None else ours > 0 and ours >= 2 * go


@dataclass(frozen=True)
class PeerRow:
    label: str
    setting: str
    key: str
    target: Target | None = None


FASTER_20 = threshold("ratio", 20, ">= 20x faster than Go", above=True)
FASTER_5 = threshold("ratio", 5, ">= 5x faster than Go", above=True)
NOT_ABOVE_GO = threshold("ratio", 1, "no more than Go", above=False)
PEER_ROWS = [
    *[PeerRow(f"B3 time to all {w:,} workers created, defaults (s)", "defaults", f"ttac/{w}",
              FASTER_20 if w == 1000 else None) for w in (64, 512, 1000)],
    *[PeerRow(f"B3 time to all {w:,} workers created, raised limits (s)", "raised", f"ttac/{w}",
              FASTER_5 if w >= 512 else None) for w in (64, 512, 1000)],
    PeerRow("B4 jobs/s sustained with p99 <= 2 s (of 5, 10, 20, 40/s), raised limits", "raised",
            "sustained/5/10/20/40", Target(">= 2x Go's", sustains_twice_go)),
    PeerRow("B4 p99 POST to launcher Job at 10 jobs/s, raised limits (s)", "raised", "p99/10",
            threshold("ratio", 2, "<= 0.5x Go's p99", above=True)),
    *[PeerRow(f"B5 API writes for one 64-worker job, creation to Succeeded, {s}", s, "writes_before_cleanup",
              threshold("ours", 64 + 12, "<= W + 12 = 76", above=False)) for s in ("defaults", "raised")],
    PeerRow("B6 reconciler RSS idle, defaults (MiB)", "defaults", "rss_idle", NOT_ABOVE_GO),
    PeerRow("B6 reconciler RSS with a 1,000-worker job live, defaults (MiB)", "defaults", "rss/1000", NOT_ABOVE_GO),
    PeerRow("B6 reconciler CPU-seconds per 1,000 pods created, raised limits", "raised", "cpu_per_1000/1000"),
]


def judged(text: str, met: bool | None) -> str:
    return f"{text}: {'not measured' if met is None else 'met' if met else '**missed**'}"


def ratio_text(row: dict[str, Any]) -> str:
    ratio = row.get("ratio")
    if ratio is None:
        return "-"
    faster = row["ratio_of"] == "go/ours"
    return show(ratio, 1 if faster else 2, unit="x faster" if faster else "x Go's")


def peer_lines(peer: dict[str, Any]) -> list[str]:
    rows = {(r["setting"], r["key"]): r for r in peer["rows"]}
    lines = []
    for spec in PEER_ROWS:
        row = rows.get((spec.setting, spec.key))
        target = judged(spec.target.text, spec.target.met(row) if row else None) if spec.target else ""
        if row is None:
            lines.append(f"| {spec.label} | - | - | - | {target} |")
            continue
        go = show(row["go"], row["digits"])
        if row.get("censored", {}).get("counts", {}).get("go"):
            go = f">= {go}"  # launchers still missing at the end of the wait: a lower bound
        lines.append(f"| {spec.label} | {go} | {show(row['ours'], row['digits'])} | {ratio_text(row)} | {target} |")
    return lines


def webhook_row(webhook: dict[str, Any], endpoint: str, concurrency: int, size_kb: int = 20) -> dict[str, Any] | None:
    return next((r for r in webhook["rows"] if (r["endpoint"], r["concurrency"], r["size_kb"]) ==
                 (endpoint, concurrency, size_kb)), None)


def webhook_ratio(webhook: dict[str, Any], endpoint: str, concurrency: int, size_kb: int = 20) -> Figure | None:
    return next((r["percent"] for r in webhook["ratios"] if (r["endpoint"], r["concurrency"], r["size_kb"]) ==
                 (endpoint, concurrency, size_kb)), None)


def both(webhook: dict[str, Any], concurrency: int, field: str, target: Target, digits: int,
         sep: bool = False) -> tuple[str, str]:
    """``mutate / validate`` cells of one field at 20 KB, and the verdict on both."""
    cells, verdicts = [], {}
    for endpoint in ("mutate", "validate"):
        row = webhook_row(webhook, endpoint, concurrency)
        figure = row[field] if row else None
        cells.append(show(figure, digits, sep))
        verdicts[endpoint] = None if figure is None else target.met({"ours": figure})
    if None in verdicts.values():
        return " / ".join(cells), judged(target.text, None)
    missed = [e for e, met in verdicts.items() if not met]
    return " / ".join(cells), f"{target.text}: " + (f"**missed** ({', '.join(missed)})" if missed else "met")


WEBHOOK_MEMORY_LIMIT_MIB = 512
"""The webhook container's memory limit (deploy/webhook, the chart): its peak RSS must stay under it."""


def webhook_lines(webhook: dict[str, Any]) -> list[str]:
    """B2's rows. Throughput is reported as measured (its target was retired by issue 36: it was set against a
    do-nothing handler); the p99s and the memory bound are targets."""
    trivial = {c: webhook_row(webhook, "trivial", c) for c in (1, 16)}
    cells = " / ".join(show(r["per_core"] if (r := webhook_row(webhook, e, 16)) else None, 0, True)
                       for e in ("mutate", "validate"))
    ratios = " / ".join(show(webhook_ratio(webhook, e, 16), 1, unit=" %") for e in ("mutate", "validate"))
    floor = f"{trivial[16]['per_core']['median']:,.0f}/s" if trivial[16] else "-"
    lines = [f"| B2 webhook requests/s per core, 20 KB MPIJob, 16 connections: mutate / validate | no webhook | "
             f"{cells} | {ratios} of a do-nothing handler's {floor} | reported, no target |"]
    for concurrency, limit in ((1, 1.0), (16, 10.0)):
        cells, verdict = both(webhook, concurrency, "p99_ms", threshold("ours", limit, f"<= {limit:g} ms",
                                                                        above=False), 2)
        yardstick = trivial[concurrency]
        base = show(yardstick["p99_ms"], 2) if yardstick else "-"
        lines.append(f"| B2 webhook p99 at {concurrency} connection{'s' if concurrency > 1 else ''}, 20 KB: "
                     f"mutate / validate (ms) | no webhook | {cells} | do-nothing handler: {base} | {verdict} |")
    memory = webhook.get("memory", {})
    idle, peak = memory.get("idle_mib"), memory.get("peak_mib")
    rss = f"{idle:.1f} / {peak:.1f} MiB" if idle is not None and peak is not None else "-"
    limit = WEBHOOK_MEMORY_LIMIT_MIB
    lines.append(f"| B2 webhook RSS idle / peak over the runs | no webhook | {rss} | | "
                 f"{judged(f'peak < {limit} MiB (its memory limit)', None if peak is None else peak < limit)} |")
    return lines


def floor_line(peer: dict[str, Any]) -> str:
    """The B0 yardstick of the same run and our W = 1,000 time against it (target: within 1.5x)."""
    floors = peer.get("floors") or []
    if not floors:
        return ""
    last = floors[-1]
    jobs = {(j["operator"], j["setting"]): j for j in last["jobs"]}
    text = (f"API server yardstick of the same run (B0: a raw client, 32 creates in flight, no operator): "
            f"{show(last['c_max'], 0, sep=True)} scheduling-gated pod creates/s (C_max)")
    if last.get("c_sched"):
        text += (f", {show(last['c_sched'], 0, sep=True)} creates/s of the pods a job really creates, bound and "
                 "started meanwhile (C_sched)")
    ours = jobs.get(("ours", "defaults"))
    if ours and "x_c_sched" in ours:
        paired = ours.get("paired_c_sched")
        by_round = f" ({paired['min']:.2f}-{paired['max']:.2f} paired by round)" if paired else ""
        go = jobs.get(("go", "defaults"))
        go_text = f", the Go operator in {go['x_c_sched']:.2f}x" if go and "x_c_sched" in go else ""
        met = "met" if ours["x_c_sched"] <= 1.5 else "**missed**"
        gated = "met" if ours["x_c_max"] <= 1.5 else "**missed**"
        text += (f". At defaults ours created all {ours['workers']:,} workers in {ours['x_c_sched']:.2f}x W / C_sched"
                 f"{by_round}{go_text}. Target within 1.5x of the floor: {met} against C_sched, {gated} against "
                 f"the gated C_max ({ours['x_c_max']:.2f}x)")
    return text + "."


def censored_line(peer: dict[str, Any]) -> str:
    row = next((r for r in peer["rows"] if (r["setting"], r["key"]) == ("raised", "p99/10")), None)
    counts = (row or {}).get("censored", {}).get("counts", {}).get("go")
    if not row or not counts:
        return ""
    c = row["censored"]
    return (f"At 10 jobs/s the Go operator had {'/'.join(map(str, counts))} of {c['of']} launchers (by round) still "
            f"missing {c['after_s']:g} s after the last POST: its p99 is a lower bound (>=).")


GATING_ROWS = {"added": "gating added per job: last worker Ready to launcher pod created",
               "release": "of which: last worker Ready to launcher Job released (or created running)",
               "published": "last worker Ready to every worker in the Service's EndpointSlices (its DNS name)",
               "to_launcher": "MPIJob created (or resumed) to launcher pod created"}


def gating_lines(gating: dict[str, Any]) -> list[str]:
    """Launcher gating on the real node (``gating.json``, hack/bench/gating.py): p50/p99/max in seconds of each
    span, from the benchmark's watch events, with the API's 1 s timestamps beside the first."""
    fig = gating["figures"]
    lines = [
        source_line("`gating.json`, launcher gating (WaitForWorkersReady) on the real node", gating),
        f"  {gating['jobs']} Open MPI pi jobs of 2 workers, {gating['figures_resumed']} created suspended and resumed, "
        f"{gating['parallel']} at a time, after {gating['warmup']} not counted. Seconds from the benchmark's own watch "
        "events (Kubernetes timestamps have 1 s resolution); percentiles linear between the closest ranks.",
        "",
        "| launcher gating, seconds | every job: p50 / p99 / max | resumed: p50 / p99 | created running: p50 / p99 |",
        "|---|---|---|---|",
    ]

    def cell(group: str, key: str, with_max: bool = False) -> str:
        f = fig[group].get(key)
        if not f:
            return "-"
        return f"{f['p50']:.3f} / {f['p99']:.3f}" + (f" / {f['max']:.3f}" if with_max else "")

    for key, label in GATING_ROWS.items():
        lines.append(f"| {label} | {cell('all', key, True)} | {cell('resumed', key)} | {cell('created', key)} |")
    api = fig["all"]["added_api"]
    metric = gating["metric"]
    mean = "-" if metric["mean"] is None else f"{metric['mean']:.2f} s"
    lines += [f"| gating added, from the API's 1 s timestamps | {api['p50']:.1f} / {api['p99']:.1f} / "
              f"{api['max']:.1f} | | |",
              f"| launcher restarts / extra launcher pods (target 0) | {fig['restarts']} / "
              f"{fig['extra_launcher_pods']} | | |",
              f"| the reconciler's mpi_operator_launcher_gated_seconds: waits, mean (the whole wait) | "
              f"{metric['count']:.0f}, {mean} | | |", ""]
    return lines


def render(peer: dict[str, Any], webhook: dict[str, Any], scale: dict[str, Any] | None = None,
           gating: dict[str, Any] | None = None, backends: dict[str, Any] | None = None,
           floors: dict[str, Any] | None = None) -> str:
    """The text between the markers."""
    lines = [
        "Latest results (hack/bench/results/):",
        "",
        source_line(f"`peer.json`, ours against the Go mpi-operator {peer['peer_version']}", peer),
        source_line("`webhook.json`, the webhook server alone", webhook),
        "",
        f"| figure | Go mpi-operator {peer['peer_version']} | ours | ours against Go (B2: against a do-nothing "
        "handler) | target |",
        "|---|---|---|---|---|",
        *peer_lines(peer),
        *webhook_lines(webhook),
        "",
    ]
    for line in (censored_line(peer), floor_line(peer)):
        if line:
            lines += [line, ""]
    if scale is not None:
        lines += scale_lines(scale)
    if floors is not None:
        lines += floors_lines(floors)
    if backends is not None:
        lines += backends_lines(backends)
    if gating is not None:
        lines += gating_lines(gating)
    return "\n".join(lines).rstrip("\n")


def load(name: str, results: Path = RESULTS) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((results / f"{name}.json").read_text(encoding="utf-8"))
    return data


def rendered(results: Path = RESULTS) -> str:
    scale = load("scale", results) if (results / "scale.json").exists() else None
    gating = load("gating", results) if (results / "gating.json").exists() else None
    backends = load("scale-backends", results) if (results / "scale-backends.json").exists() else None
    floors = load("scale-floors", results) if (results / "scale-floors.json").exists() else None
    return render(load("peer", results), load("webhook", results), scale, gating, backends, floors)


def block(text: str) -> str:
    return f"{START}\n{text}\n{END}"


def current_block(doc: Path = DOC) -> str:
    """The generated part of the page, markers included (empty when the page has none)."""
    page = doc.read_text(encoding="utf-8")
    if START not in page or END not in page:
        return ""
    return START + page.split(START, 1)[1].split(END, 1)[0] + END


def rewrite(doc: Path = DOC, results: Path = RESULTS) -> bool:
    """Replace the page's generated part with the rendering of ``results``; True when it changed."""
    page = doc.read_text(encoding="utf-8")
    if START not in page or END not in page:
        raise SystemExit(f"{doc.name} has no {START} ... {END} markers: add them where the summary goes")
    head, rest = page.split(START, 1)
    new = head + block(rendered(results)) + rest.split(END, 1)[1]
    doc.write_text(new, encoding="utf-8")
    return new != page


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only compare the page with the results files")
    parser.add_argument("--doc", type=Path, default=DOC)
    parser.add_argument("--results", type=Path, default=RESULTS, help="the directory of peer.json and webhook.json")
    args = parser.parse_args(argv)
    if args.check:
        if current_block(args.doc) != block(rendered(args.results)):
            sys.exit(f"{args.doc.name}: the summary differs from {args.results}; run python -m hack.bench.doc")
        return
    print(f"{args.doc.name}: {'rewritten' if rewrite(args.doc, args.results) else 'unchanged'}")


if __name__ == "__main__":
    main()
