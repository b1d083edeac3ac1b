"""Results of the peer benchmark -> ratio tables (Markdown), the docs/benchmarks.md section and PNG plots."""

from __future__ import annotations

import os
import statistics
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from hack.procstat import describe_shares

SECTION_START = "<!-- bench-peer: start (written by hack/bench_peer.py; replaced on each run) -->"
SECTION_END = "<!-- bench-peer: end -->"
NAMES = {"go": "Go mpi-operator v0.8.2", "ours": "ours"}

Run = dict[str, Any]


def runs_of(results: dict[str, Any], kind: str, setting: str) -> list[Run]:
    return [r for r in results["runs"] if r["operator"] == kind and r["setting"] == setting]


def paired(results: dict[str, Any], setting: str) -> list[tuple[Run, Run]]:
    """(Go run, our run) of the same round and setting."""
    ours = {r["round"]: r for r in runs_of(results, "ours", setting)}
    return [(go, ours[go["round"]]) for go in runs_of(results, "go", setting) if go["round"] in ours]


def b3(run: Run, workers: int) -> dict[str, Any] | None:
    return next((m for m in run.get("b3", []) if m["workers"] == workers), None)


def b4(run: Run, rate: float) -> dict[str, Any] | None:
    return next((m for m in run.get("b4", []) if m["rate"] == rate), None)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def spread(values: list[float], digits: int = 2) -> str:
    """``median (min-max)``."""
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def ratio_cells(values: list[float], digits: int = 2) -> str:
    """``min | median | max`` cells."""
    if not values:
        return "- | - | -"
    return " | ".join(f"{v:.{digits}f}" for v in (min(values), statistics.median(values), max(values)))


def values(pairs: Iterable[tuple[Run, Run]], metric: Callable[[Run], float | None], side: int) -> list[float]:
    out = []
    for pair in pairs:
        value = metric(pair[side])
        if value is not None:
            out.append(value)
    return out


def ratios(pairs: Iterable[tuple[Run, Run]], metric: Callable[[Run], float | None],
           ours_over_go: bool = False) -> list[float]:
    out = []
    for go, ours in pairs:
        a, b = metric(go), metric(ours)
        if a is not None and b is not None and a > 0 and b > 0:
            out.append(b / a if ours_over_go else a / b)
    return out


def sustained(run: Run, limit: float = 2.0) -> float | None:
    """The highest B4 rate whose p99 POST-to-launcher stayed within ``limit`` seconds with every launcher
    created (0 when none did); None without B4 figures."""
    rows = run.get("b4", [])
    if not rows:
        return None
    ok = [m["rate"] for m in rows if not m["missing"] and m["latencies"] and pct(m["latencies"], 99) <= limit]
    return max(ok, default=0.0)


def b4_rates_of(run: Run) -> tuple[float, ...]:
    return tuple(sorted(m["rate"] for m in run.get("b4", [])))


def b4_rate_sets(pairs: list[tuple[Run, Run]]) -> list[tuple[float, ...]]:
    """The distinct sets of B4 rates the paired runs ran, in order of their first appearance."""
    sets: list[tuple[float, ...]] = []
    for _, ours in pairs:
        rates = b4_rates_of(ours)
        if rates and rates not in sets:
            sets.append(rates)
    return sets


def total_writes(run: Run) -> float | None:
    writes = run.get("b5", {}).get("writes")
    return float(sum(writes.values())) if writes else None


def writes_before_cleanup(run: Run) -> float | None:
    """All writes but the cleanup's pod deletions (the spec's W + 12 budget counts these)."""
    writes = run.get("b5", {}).get("writes")
    return float(sum(n for k, n in writes.items() if k != "delete pods")) if writes else None


def non_create_writes(run: Run) -> float | None:
    writes = run.get("b5", {}).get("writes")
    return float(sum(n for k, n in writes.items() if not k.startswith("create "))) if writes else None


def cpu_per_1000(workers: int) -> Callable[[Run], float | None]:
    def metric(run: Run) -> float | None:
        m = b3(run, workers)
        return float(m["cpu"]) / workers * 1000 if m else None

    return metric


def loaded_rss(workers: int) -> Callable[[Run], float | None]:
    def metric(run: Run) -> float | None:
        m = b3(run, workers)
        return float(m["rss_kb"]) / 1024 if m else None

    return metric


def table(results: dict[str, Any]) -> str:
    """The Markdown ratio table: one row per metric, Go and our medians (min-max), the ratio per round."""
    meta = results["meta"]
    lines = ["| benchmark | setting | metric | Go (median, min-max) | ours (median, min-max) | ratio | "
             "min | median | max |", "|---|---|---|---|---|---|---|---|---|"]

    def row(bench: str, setting: str, metric: str, fn: Callable[[Run], float | None], digits: int = 2,
            ours_over_go: bool = False, ratio_digits: int = 2) -> None:
        pairs = paired(results, setting)
        if not pairs:
            return
        go_v, our_v = values(pairs, fn, 0), values(pairs, fn, 1)
        if not go_v and not our_v:
            return
        label = "ours/Go" if ours_over_go else "Go/ours"
        lines.append(f"| {bench} | {setting} | {metric} | {spread(go_v, digits)} | {spread(our_v, digits)} | "
                     f"{label} | {ratio_cells(ratios(pairs, fn, ours_over_go), ratio_digits)} |")

    for setting in meta["settings"]:
        for workers in meta["sizes"][setting]:
            row("B3", setting, f"POST to all {workers} workers created (s)", _b3_field(workers, "ttac"), 3)
        for workers in meta["sizes"][setting]:
            row("B3", setting, f"POST to launcher Job created, W={workers} (s)", _b3_field(workers, "launcher"), 3)
    for setting in meta["settings"]:
        for rate in meta["b4_rates"] if setting in meta["b4_settings"] else []:
            note = censored_note(results, setting, rate)
            row("B4", setting, f"p50 POST to launcher at {rate:g}/s (s){note}", _b4_pct(rate, 50), 3)
            row("B4", setting, f"p99 POST to launcher at {rate:g}/s (s){note}", _b4_pct(rate, 99), 3)
        if setting in meta["b4_settings"]:
            for rates in b4_rate_sets(paired(results, setting)):  # runs of other rates sustain other maxima
                def of_these(run: Run, rates: tuple[float, ...] = rates) -> float | None:
                    return sustained(run) if b4_rates_of(run) == rates else None

                row("B4", setting, f"jobs/s sustained with p99 <= 2 s, of {'/'.join(f'{r:g}' for r in rates)}/s",
                    of_these, 1, ours_over_go=True)
    for setting in meta["settings"]:
        row("B5", setting, f"API writes per job, W={meta['b5_workers']}", total_writes, 0, ours_over_go=True)
        row("B5", setting, "writes but the cleanup's pod deletions", writes_before_cleanup, 0, ours_over_go=True)
        row("B5", setting, "non-create writes per job (incl. pod deletions)", non_create_writes, 0,
            ours_over_go=True)
    for setting in meta["settings"]:
        row("B6", setting, "RSS idle (MiB)", idle_rss, 1, ours_over_go=True)
        big = [w for w in meta["sizes"][setting] if w >= 512 or w == max(meta["sizes"][setting])]
        for workers in big:
            row("B6", setting, f"RSS with the W={workers} job live (MiB)", loaded_rss(workers), 1,
                ours_over_go=True)
        for workers in big:
            row("B6", setting, f"CPU-s per 1,000 pods created (W={workers} job)", cpu_per_1000(workers), 2,
                ours_over_go=True)
    return "\n".join(lines)


def _b3_field(workers: int, field: str) -> Callable[[Run], float | None]:
    def metric(run: Run) -> float | None:
        m = b3(run, workers)
        return float(m[field]) if m else None

    return metric


def _b4_pct(rate: float, p: float) -> Callable[[Run], float | None]:
    """The percentile over created and censored jobs (a lower bound when it falls on a censored one)."""
    def metric(run: Run) -> float | None:
        m = b4(run, rate)
        every = [*m["latencies"], *m.get("censored", [])] if m else []
        return pct(every, p) if every else None

    return metric


def censored_note(results: dict[str, Any], setting: str, rate: float) -> str:
    notes = []
    for kind in ("go", "ours"):
        counts = [(len(m.get("censored", [])), m["count"]) for r in runs_of(results, kind, setting)
                  if (m := b4(r, rate))]
        if any(n for n, _ in counts):
            left = "/".join(str(n) for n, _ in counts)
            notes.append(f"{NAMES[kind]} had {left} of {counts[0][1]} launchers still missing "
                         f"{results['meta'].get('b4_wait', 0):g} s after the last POST: lower bounds")
    return f" [{'; '.join(notes)}]" if notes else ""


def idle_rss(run: Run) -> float | None:
    return float(run["idle_rss_kb"]) / 1024 if "idle_rss_kb" in run else None


def floor_lines(results: dict[str, Any]) -> list[str]:
    """Our default-settings TTAC against the raw create floors of the same run (B0): W / C_max of
    scheduling-gated pods, and W / C_sched of the worker template as emitted, scheduled and started."""
    out = []
    sources = sorted({c.get("source", 0) for c in results.get("b0", [])})
    for source in sources:
        b0s = _b0_of(results, source)
        ceilings, scheduled = _rates(b0s, "rate"), _rates(b0s, "scheduled_rate")
        c_max = statistics.median(ceilings)
        run_label = f" (run {source + 1})" if len(sources) > 1 else ""
        out.append(f"B0 raw pod-create ceiling C_max{run_label}: {spread(ceilings, 0)} creates/s (2,000 "
                   "worker-shaped, scheduling-gated Pods, 32 in flight, no operator running)" +
                   (f"; C_sched, the same Pods as our reconciler emits them, bound and started meanwhile: "
                    f"{spread(scheduled, 0)} creates/s." if scheduled else "."))
        for setting in results["meta"]["settings"]:
            for kind in ("ours", "go"):
                runs = [r for r in runs_of(results, kind, setting) if r.get("source", 0) == source]
                big = max(results["meta"]["sizes"][setting], default=0)
                ttacs = [m["ttac"] for r in runs if (m := b3(r, big))]
                if ttacs and big:
                    floor = big / c_max
                    busy = cpu_line(runs, big)
                    ttac = statistics.median(ttacs)
                    out.append(f"{NAMES[kind]}, {setting}, W={big}: TTAC {spread(ttacs, 2)} s = "
                               f"{ttac / floor:.2f}x the floor W/C_max = {floor:.2f} s"
                               f"{_scheduled_floor(runs, b0s, big, ttac)} of the same run{run_label}" +
                               (f". CPU from the POST to the last create (medians): {busy}." if busy else "."))
    return out


def _b0_of(results: dict[str, Any], source: int) -> list[dict[str, Any]]:
    """The B0 measurements of one results file (of the merged ones)."""
    return [c for c in results.get("b0", []) if c.get("source", 0) == source]


def _rates(b0s: list[dict[str, Any]], key: str) -> list[float]:
    """``rate`` (gated) or ``scheduled_rate`` of each B0 that has it (results before C_sched have none)."""
    return [c[key] for c in b0s if key in c]


def _scheduled_floor(runs: list[Run], b0s: list[dict[str, Any]], workers: int, ttac: float) -> str:
    """The median ``ttac`` against W / C_sched, and each run against its own round's (min | median | max)."""
    scheduled = _rates(b0s, "scheduled_rate")
    if not scheduled:
        return ""
    c_sched = statistics.median(scheduled)
    rates = {c["round"]: c["scheduled_rate"] for c in b0s if "scheduled_rate" in c}
    paired = [m["ttac"] * rates[r["round"]] / workers for r in runs if (m := b3(r, workers)) and r["round"] in rates]
    text = f", {ttac * c_sched / workers:.2f}x the floor W/C_sched = {workers / c_sched:.2f} s"
    if len(paired) > 1:
        text += f" (paired by round: {min(paired):.2f} | {statistics.median(paired):.2f} | {max(paired):.2f})"
    return text


def cpu_line(runs: list[Run], workers: int) -> str | None:
    """Every process's CPU during the W-worker B3 job, median over ``runs``, in percent of one core."""
    shares = [m["cpu_percent"] for r in runs if (m := b3(r, workers)) and m.get("cpu_percent")]
    if not shares:
        return None
    labels = {label for share in shares for label in share}
    return describe_shares({label: statistics.median(s.get(label, 0.0) for s in shares) for label in labels})


def b5_detail(results: dict[str, Any]) -> list[str]:
    out = []
    for setting in results["meta"]["settings"]:
        for kind in ("go", "ours"):
            runs = [r for r in runs_of(results, kind, setting) if r.get("b5")]
            if not runs:
                continue
            writes = runs[-1]["b5"]["writes"]
            detail = ", ".join(f"{k} {n}" for k, n in sorted(writes.items()))
            agents = "; ".join(f"`{a}` {n}" for a, n in sorted(runs[-1]["b5"]["user_agents"].items()))
            out.append(f"- {NAMES[kind]}, {setting}, round {runs[-1]['round']}: {detail} (user agents: {agents})")
    return out


def section(results: dict[str, Any], images: list[Path], docs_dir: Path, commands: str) -> str:
    meta = results["meta"]
    links = "\n".join(f"![{p.stem}]({Path(os.path.relpath(p, docs_dir)).as_posix()})" for p in images)
    settings = "; ".join(f"{name}: Go `{meta['flags'][name]['go'] or '(no flags)'}`, ours "
                         f"`{meta['flags'][name]['ours'] or '(no flags)'}`" for name in meta["settings"])
    parts = [
        SECTION_START,
        "## Peer: the upstream Go mpi-operator v0.8.2 side by side (B3/B4/B5/B6)",
        "",
        f"`make bench-peer` (`{commands}`), {meta['date']}: github.com/kubeflow/mpi-operator "
        f"{meta['peer_version']} built from the Go module proxy (`hack/build-peer.sh`, benchmark only) and "
        f"`python -m reconciler` run alone in turn on one local control plane ({meta['nodes']} kwok nodes x "
        f"{meta['pods_per_node']} pods, audit log on), interleaved (the order alternates each round), "
        f"{meta['rounds']} round(s). Both cluster-wide with leader election on (Lease in `mpi-operator`), admin "
        f"credentials. Settings: {settings}. Our client-side limit with no flags, read from reconciler/options.py "
        f"at run time: {limits(meta)}; Go's: 5 QPS / 10 burst. "
        f"Machine: {meta['machine']}.",
        "",
        "Ratio columns: Go/ours for times (above 1: we are faster), ours/Go for jobs/s (above 1: we sustain "
        "more), writes, memory and CPU (below 1: we use less); min | median | max over the paired rounds.",
        "",
        table(results),
        "",
        *[f"- {line}" for line in floor_lines(results)],
        "",
        "B5 writes by verb and resource (last round), from the audit log, by user agent. Both operators' user "
        "agents start `mpi-operator/`: ours is `mpi-operator/<version> (<os>/<arch>) pid/<pid>`, the Go "
        "operator's `mpi-operator/v0.0.0 (linux/amd64) kubernetes/$Format/<client>` (its MPIJob client carries "
        "the `leader-election` suffix: client-go's `AddUserAgent` mutates the shared rest.Config). Each namespace "
        "held one job and only one operator ran, so every write there is that operator's:",
        "",
        *b5_detail(results),
        "",
        f"B4: {meta['b4_jobs']} MPIJobs of {meta['b4_workers']} workers submitted open loop; latency = POST to "
        "the launcher Job seen by a watch; 'sustained' is the highest rate run whose p99 stayed <= 2 s. "
        "B6: RSS 'idle' is after the warm-up job and the idle period; CPU-seconds are "
        "the operator's user+system time from the POST until that B3 job's workers and launcher exist; 'RSS with "
        "the job live' is sampled at that moment.",
        "",
        links,
        "",
        *[f"Note: {note}" for note in meta.get("notes", [])],
        SECTION_END,
    ]
    return "\n".join(parts).replace("\n\n\n", "\n\n") + "\n"


def limits(meta: dict[str, Any]) -> str:
    if not meta["our_default_qps"]:
        return "none (no client-side rate limit)"
    return f"{meta['our_default_qps']:g} QPS / {meta['our_default_burst']} burst"


def replace_section(doc: Path, text: str) -> None:
    current = doc.read_text() if doc.exists() else "# Benchmarks\n"
    if SECTION_START in current and SECTION_END in current:
        head, rest = current.split(SECTION_START, 1)
        tail = rest.split(SECTION_END, 1)[1].lstrip("\n")
        new = head + text + ("\n" + tail if tail else "")
    else:
        new = current.rstrip("\n") + "\n\n" + text
    doc.write_text(new)


# ---- plots


STYLE = {("go", "defaults"): ("tab:red", "o", "--"), ("go", "raised"): ("tab:red", "s", "-"),
         ("ours", "defaults"): ("tab:blue", "o", "--"), ("ours", "raised"): ("tab:blue", "s", "-")}


def _pyplot() -> Any:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def _g(value: float, _: object = None) -> str:
    return f"{value:g}"


def draw_ttac(ax: Any, results: dict[str, Any], legend_size: int = 8) -> None:
    from matplotlib import ticker  # noqa: PLC0415

    meta = results["meta"]
    for setting in meta["settings"]:
        for kind in ("go", "ours"):
            runs = runs_of(results, kind, setting)
            xs, med, lo, hi = [], [], [], []
            for workers in meta["sizes"][setting]:
                t = [m["ttac"] for r in runs if (m := b3(r, workers))]
                if t:
                    xs.append(workers)
                    med.append(statistics.median(t))
                    lo.append(statistics.median(t) - min(t))
                    hi.append(max(t) - statistics.median(t))
            if not xs:
                continue
            color, marker, line = STYLE[(kind, setting)]
            if setting == "raised":
                detail = meta["flags"][setting]["ours"]
            else:
                detail = "5 QPS / 10 burst" if kind == "go" else (
                    f"{meta['our_default_qps']:g} QPS / {meta['our_default_burst']} burst" if meta["our_default_qps"]
                    else "no client-side limit")
            label = f"{NAMES[kind]}, {setting} ({detail})"
            ax.errorbar(xs, med, yerr=[lo, hi], color=color, marker=marker, linestyle=line, capsize=3, label=label)
            ax.annotate(f"{med[-1]:.2f} s", (xs[-1], med[-1]), textcoords="offset points",
                        xytext=(8, 6 if setting == "defaults" else -10), fontsize=8, color=color)
    all_sizes = sorted({w for s in meta["settings"] for w in meta["sizes"][s]})
    sources = sorted({c.get("source", 0) for c in results.get("b0", [])})
    for source, style in zip(sources, (":", "-."), strict=False):
        b0s = _b0_of(results, source)
        c_max = statistics.median(_rates(b0s, "rate"))
        which = f"run {source + 1}, " if len(sources) > 1 else ""
        ax.plot(all_sizes, [w / c_max for w in all_sizes], color="gray", linestyle=style,
                label=f"raw create floor W / C_max (B0, {which}{c_max:.0f} gated pods/s)")
        if scheduled := _rates(b0s, "scheduled_rate"):
            c_sched = statistics.median(scheduled)
            ax.plot(all_sizes, [w / c_sched for w in all_sizes], color="black", linestyle=style,
                    label=f"raw create floor W / C_sched (B0, {which}{c_sched:.0f} scheduled pods/s)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(all_sizes)
    ax.set_xticklabels([str(w) for w in all_sizes])
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(_g))
    ax.set_xlim(min(all_sizes, default=1) * 0.8, max(all_sizes, default=1) * 2.2)
    ax.set_xlabel("workers W in one MPIJob")
    ax.set_ylabel("seconds, POST to all W worker Pods created")
    ax.set_title(f"B3: time to all workers created (median, min-max; rounds: {meta['rounds']}); lower is better",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    bottom, top = ax.get_ylim()
    ax.set_ylim(bottom, top * (top / bottom) ** 0.5)  # headroom (log scale): the legend sits above the curves
    ax.legend(fontsize=legend_size, loc="upper left")
    lines = []
    for setting in meta["settings"]:
        big = max(meta["sizes"][setting], default=0)
        got = ratios(paired(results, setting), _b3_field(big, "ttac")) if big else []
        if got:
            lines.append(f"W={big}, {setting}: ours {statistics.median(got):.1f}x faster (Go/ours, median)")
    if lines:
        ax.text(0.98, 0.03, "\n".join(lines), transform=ax.transAxes, ha="right", va="bottom", fontsize=8,
                bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85})


def has_b4(results: dict[str, Any]) -> bool:
    return any(m["latencies"] for r in results["runs"] for m in r.get("b4", []))


def draw_cdf(ax: Any, results: dict[str, Any], rate: float, legend_size: int = 7) -> None:
    from matplotlib import ticker  # noqa: PLC0415

    meta = results["meta"]
    for setting in [s for s in meta["settings"] if s in meta["b4_settings"]]:
        for kind in ("go", "ours"):
            rows = [m for r in runs_of(results, kind, setting) if (m := b4(r, rate))]
            pooled = sorted(x for m in rows for x in m["latencies"])
            waiting = sorted(x for m in rows for x in m.get("censored", []))
            if not pooled:
                continue
            color, _, line = STYLE[(kind, setting)]
            n = len(pooled) + len(waiting)  # censored jobs never reach the curve: it tops out below 1
            every = [*pooled, *waiting]
            p50, p99 = pct(every, 50), pct(every, 99)
            bound = f"\n  (lower bounds: {len(waiting)}/{n} not created in the wait)" if waiting else ""
            ax.step(pooled, [(i + 1) / n for i in range(len(pooled))], where="post", color=color,
                    linestyle=line, label=f"{NAMES[kind]}, {setting}: p50 {p50:.2f} s, p99 {p99:.2f} s{bound}")
    ax.axvline(2.0, color="gray", linestyle=":", label="p99 target 2 s")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(_g))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel("seconds, POST to launcher Job created")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(f"B4: {meta['b4_jobs']} MPIJobs x {meta['b4_workers']} workers at {rate:g}/s "
                 "(rounds pooled); left is better", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=legend_size, loc="upper left")


def _bars(ax: Any, groups: list[str], series: dict[str, list[float]], colors: dict[str, str], ylabel: str,
          title: str, digits: int = 0) -> None:
    width = 0.8 / max(1, len(series))
    for i, (name, heights) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        bars = ax.bar(xs, heights, width, label=name, color=colors[name])
        ax.bar_label(bars, labels=[f"{h:.{digits}f}" if h else "" for h in heights], fontsize=7)
    top = max((h for heights in series.values() for h in heights), default=0)
    if top:
        ax.set_ylim(0, top * 1.35)  # room for the legend and notes above the bars
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")


def _median(runs: list[Run], metric: Callable[[Run], float | None]) -> float:
    got = [v for r in runs if (v := metric(r)) is not None]
    return statistics.median(got) if got else 0.0


def draw_writes(ax: Any, results: dict[str, Any]) -> None:
    meta = results["meta"]
    groups, series = [], {f"{NAMES['go']}": [], "ours": []}  # type: ignore[var-annotated]
    for setting in meta["settings"]:
        for label, fn in (("all writes", total_writes), ("but cleanup\ndeletes", writes_before_cleanup),
                          ("non-create", non_create_writes)):
            groups.append(f"{setting}\n{label}")
            series[NAMES["go"]].append(_median(runs_of(results, "go", setting), fn))
            series["ours"].append(_median(runs_of(results, "ours", setting), fn))
    _bars(ax, groups, series, {NAMES["go"]: "tab:red", "ours": "tab:blue"}, "API writes (audit log)",
          f"B5: API writes for one W={meta['b5_workers']} job, creation to cleanup; lower is better")


def draw_footprint(ax: Any, results: dict[str, Any]) -> None:
    meta = results["meta"]
    groups, series = [], {f"{NAMES['go']}": [], "ours": []}  # type: ignore[var-annotated]
    for setting in meta["settings"]:
        big = max(meta["sizes"][setting], default=0)
        for label, fn in (("idle", idle_rss), (f"W={big} live", loaded_rss(big))):
            groups.append(f"{setting}\n{label}")
            series[NAMES["go"]].append(_median(runs_of(results, "go", setting), fn))
            series["ours"].append(_median(runs_of(results, "ours", setting), fn))
    _bars(ax, groups, series, {NAMES["go"]: "tab:red", "ours": "tab:blue"}, "RSS (MiB)",
          "B6: resident memory of the operator process; lower is better")
    lines = []
    for setting in meta["settings"]:
        big = max(meta["sizes"][setting], default=0)
        go, ours = (_median(runs_of(results, k, setting), cpu_per_1000(big)) for k in ("go", "ours"))
        if go and ours:
            lines.append(f"CPU-s per 1,000 pods created, {setting} (W={big}): Go {go:.2f}, ours {ours:.2f}")
    if lines:
        ax.text(0.02, 0.97, "\n".join(lines), transform=ax.transAxes, ha="left", va="top", fontsize=8,
                bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85})


def plot_ttac(results: dict[str, Any], path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=110)
    draw_ttac(ax, results)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_b4(results: dict[str, Any], path: Path) -> Path | None:
    meta = results["meta"]
    rates = meta["b4_rates"]
    if not rates or not has_b4(results):
        return None
    plt = _pyplot()
    columns = min(2, len(rates))
    rows = -(-len(rates) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(7 * columns, 5 * rows), dpi=110, squeeze=False)
    cells = [ax for row in axes for ax in row]
    for ax, rate in zip(cells, rates, strict=False):
        draw_cdf(ax, results, rate)
    for ax in cells[len(rates):]:
        ax.set_axis_off()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_summary(results: dict[str, Any], path: Path) -> Path:
    """One picture: B3 time against W, B4 CDF at the highest rate, B5 writes, B6 memory."""
    meta = results["meta"]
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(14, 10), dpi=100)
    draw_ttac(axes[0][0], results, legend_size=7)
    if meta["b4_rates"] and has_b4(results):
        draw_cdf(axes[0][1], results, max(meta["b4_rates"]))
    else:
        axes[0][1].set_axis_off()
    draw_writes(axes[1][0], results)
    draw_footprint(axes[1][1], results)
    title = (f"Ours vs the upstream Go mpi-operator {meta['peer_version']} on one local control plane "
             f"({meta['nodes']} kwok nodes, 2-core VM), {meta['date']}")
    fig.suptitle(textwrap.fill(title, 150), fontsize=12)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
