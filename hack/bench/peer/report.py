"""Results of the peer benchmark -> the figures a results file keeps (rows of Go's and our figures with the
ratio per round, the B0 floors, B5's writes), their Markdown, and PNG plots."""

from __future__ import annotations

import statistics
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from hack.bench.figures import Figure, show, stat

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
    return show(stat(values), digits)


def ratio_cells(figure: Figure | None, digits: int = 2) -> str:
    """``min | median | max`` cells."""
    if figure is None:
        return "- | - | -"
    return " | ".join(f"{figure[k]:.{digits}f}" for k in ("min", "median", "max"))


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


def rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per metric: Go's and our figures over the paired rounds, and the ratio of each round's pair
    (Go/ours for times, ours/Go for jobs/s, writes, memory and CPU)."""
    meta = results["meta"]
    out: list[dict[str, Any]] = []

    def row(bench: str, setting: str, key: str, metric: str, fn: Callable[[Run], float | None], digits: int = 2,
            ours_over_go: bool = False, censored: dict[str, Any] | None = None) -> None:
        pairs = paired(results, setting)
        go_v, our_v = values(pairs, fn, 0), values(pairs, fn, 1)
        if not go_v and not our_v:
            return
        out.append({"benchmark": bench, "setting": setting, "key": key, "metric": metric, "digits": digits,
                    "go": stat(go_v), "ours": stat(our_v), "ratio_of": "ours/go" if ours_over_go else "go/ours",
                    "ratio": stat(ratios(pairs, fn, ours_over_go)), **({"censored": censored} if censored else {})})

    for setting in meta["settings"]:
        for workers in meta["sizes"][setting]:
            row("B3", setting, f"ttac/{workers}", f"POST to all {workers} workers created (s)",
                _b3_field(workers, "ttac"), 3)
        for workers in meta["sizes"][setting]:
            row("B3", setting, f"launcher/{workers}", f"POST to launcher Job created, W={workers} (s)",
                _b3_field(workers, "launcher"), 3)
    for setting in meta["settings"]:
        for rate in meta["b4_rates"] if setting in meta["b4_settings"] else []:
            censored = censored_counts(results, setting, rate)
            for p in (50, 99):
                row("B4", setting, f"p{p}/{rate:g}", f"p{p} POST to launcher at {rate:g}/s (s)", _b4_pct(rate, p), 3,
                    censored=censored)
        if setting in meta["b4_settings"]:
            for rates in b4_rate_sets(paired(results, setting)):  # runs of other rates sustain other maxima
                def of_these(run: Run, rates: tuple[float, ...] = rates) -> float | None:
                    return sustained(run) if b4_rates_of(run) == rates else None

                listed = "/".join(f"{r:g}" for r in rates)
                row("B4", setting, f"sustained/{listed}", f"jobs/s sustained with p99 <= 2 s, of {listed}/s",
                    of_these, 1, ours_over_go=True)
    for setting in meta["settings"]:
        row("B5", setting, "writes", f"API writes per job, W={meta['b5_workers']}", total_writes, 0, ours_over_go=True)
        row("B5", setting, "writes_before_cleanup", "writes but the cleanup's pod deletions", writes_before_cleanup, 0,
            ours_over_go=True)
        row("B5", setting, "non_create_writes", "non-create writes per job (incl. pod deletions)", non_create_writes,
            0, ours_over_go=True)
    for setting in meta["settings"]:
        row("B6", setting, "rss_idle", "RSS idle (MiB)", idle_rss, 1, ours_over_go=True)
        big = [w for w in meta["sizes"][setting] if w >= 512 or w == max(meta["sizes"][setting])]
        for workers in big:
            row("B6", setting, f"rss/{workers}", f"RSS with the W={workers} job live (MiB)", loaded_rss(workers), 1,
                ours_over_go=True)
        for workers in big:
            row("B6", setting, f"cpu_per_1000/{workers}", f"CPU-s per 1,000 pods created (W={workers} job)",
                cpu_per_1000(workers), 2, ours_over_go=True)
    return out


def table_text(rows: list[dict[str, Any]]) -> str:
    """The Markdown ratio table of ``rows``: Go and our medians (min-max), the ratio per round (min | median | max)."""
    lines = ["| benchmark | setting | metric | Go (median, min-max) | ours (median, min-max) | ratio | "
             "min | median | max |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        label = "ours/Go" if r["ratio_of"] == "ours/go" else "Go/ours"
        lines.append(f"| {r['benchmark']} | {r['setting']} | {r['metric']}{censored_note(r)} | "
                     f"{show(r['go'], r['digits'])} | {show(r['ours'], r['digits'])} | {label} | "
                     f"{ratio_cells(r['ratio'])} |")
    return "\n".join(lines)


def table(results: dict[str, Any]) -> str:
    return table_text(rows(results))


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


def censored_counts(results: dict[str, Any], setting: str, rate: float) -> dict[str, Any] | None:
    """Per operator with any, how many B4 launchers each round still missed at the end of the wait."""
    counts, jobs = {}, 0
    for kind in ("go", "ours"):
        rows = [m for r in runs_of(results, kind, setting) if (m := b4(r, rate))]
        if any(m.get("censored") for m in rows):
            counts[kind] = [len(m.get("censored", [])) for m in rows]
            jobs = rows[0]["count"]
    return {"counts": counts, "of": jobs, "after_s": results["meta"].get("b4_wait", 0)} if counts else None


def censored_note(row: dict[str, Any]) -> str:
    censored = row.get("censored")
    if not censored:
        return ""
    notes = [f"{NAMES[kind]} had {'/'.join(map(str, counts))} of {censored['of']} launchers still missing "
             f"{censored['after_s']:g} s after the last POST: lower bounds"
             for kind, counts in censored["counts"].items()]
    return f" [{'; '.join(notes)}]"


def idle_rss(run: Run) -> float | None:
    return float(run["idle_rss_kb"]) / 1024 if "idle_rss_kb" in run else None


def floors(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per results file (of the merged ones): B0's ceilings, and each operator's TTAC at the largest W against
    the floors W / C_max (scheduling-gated pods) and W / C_sched (the worker template as emitted, scheduled and
    started), the latter also paired by round; every process's CPU meanwhile (medians, % of one core)."""
    out = []
    sources = sorted({c.get("source", 0) for c in results.get("b0", [])})
    for source in sources:
        b0s = _b0_of(results, source)
        ceilings, scheduled = _rates(b0s, "rate"), _rates(b0s, "scheduled_rate")
        c_max = statistics.median(ceilings)
        jobs = []
        for setting in results["meta"]["settings"]:
            for kind in ("ours", "go"):
                runs = [r for r in runs_of(results, kind, setting) if r.get("source", 0) == source]
                big = max(results["meta"]["sizes"][setting], default=0)
                ttacs = [m["ttac"] for r in runs if (m := b3(r, big))]
                if ttacs and big:
                    ttac = statistics.median(ttacs)
                    job = {"operator": kind, "setting": setting, "workers": big, "ttac": stat(ttacs),
                           "floor_c_max": big / c_max, "x_c_max": ttac * c_max / big,
                           **_scheduled_floor(runs, b0s, big, ttac), **_cpu(runs, big)}
                    jobs.append(job)
        out.append({"run": source + 1 if len(sources) > 1 else None, "c_max": stat(ceilings),
                    "c_sched": stat(scheduled), "jobs": jobs})
    return out


def floor_text(floors: list[dict[str, Any]]) -> list[str]:
    out = []
    for floor in floors:
        run_label = f" (run {floor['run']})" if floor["run"] else ""
        out.append(f"B0 raw pod-create ceiling C_max{run_label}: {show(floor['c_max'], 0)} creates/s (2,000 "
                   "worker-shaped, scheduling-gated Pods, 32 in flight, no operator running)" +
                   (f"; C_sched, the same Pods as our reconciler emits them, bound and started meanwhile: "
                    f"{show(floor['c_sched'], 0)} creates/s." if floor["c_sched"] else "."))
        for job in floor["jobs"]:
            text = (f"{NAMES[job['operator']]}, {job['setting']}, W={job['workers']}: TTAC {show(job['ttac'], 2)} s = "
                    f"{job['x_c_max']:.2f}x the floor W/C_max = {job['floor_c_max']:.2f} s")
            if "x_c_sched" in job:
                text += f", {job['x_c_sched']:.2f}x the floor W/C_sched = {job['floor_c_sched']:.2f} s"
            if paired_c := job.get("paired_c_sched"):
                text += f" (paired by round: {ratio_cells(paired_c)})"
            text += f" of the same run{run_label}"
            if job.get("cpu_percent"):
                text += f". CPU from the POST to the last create (medians): {cpu_text(job)}"
            out.append(text + ".")
    return out


def floor_lines(results: dict[str, Any]) -> list[str]:
    """Each operator's TTAC at the largest W against the raw create floors of the same run (B0)."""
    return floor_text(floors(results))


def _b0_of(results: dict[str, Any], source: int) -> list[dict[str, Any]]:
    """The B0 measurements of one results file (of the merged ones)."""
    return [c for c in results.get("b0", []) if c.get("source", 0) == source]


def _rates(b0s: list[dict[str, Any]], key: str) -> list[float]:
    """``rate`` (gated) or ``scheduled_rate`` of each B0 that has it (results before C_sched have none)."""
    return [c[key] for c in b0s if key in c]


def _scheduled_floor(runs: list[Run], b0s: list[dict[str, Any]], workers: int, ttac: float) -> dict[str, Any]:
    """The median ``ttac`` against W / C_sched, and (over two rounds or more) each run against its own round's."""
    scheduled = _rates(b0s, "scheduled_rate")
    if not scheduled:
        return {}
    c_sched = statistics.median(scheduled)
    rates = {c["round"]: c["scheduled_rate"] for c in b0s if "scheduled_rate" in c}
    paired = [m["ttac"] * rates[r["round"]] / workers for r in runs if (m := b3(r, workers)) and r["round"] in rates]
    out = {"floor_c_sched": workers / c_sched, "x_c_sched": ttac * c_sched / workers}
    return {**out, "paired_c_sched": stat(paired)} if len(paired) > 1 else out


def _cpu(runs: list[Run], workers: int) -> dict[str, Any]:
    """Every process's CPU during the W-worker B3 job, median over ``runs``, in percent of one core."""
    shares = [m["cpu_percent"] for r in runs if (m := b3(r, workers)) and m.get("cpu_percent")]
    if not shares:
        return {}
    labels = sorted({label for share in shares for label in share})
    medians = {label: statistics.median(s.get(label, 0.0) for s in shares) for label in labels}
    return {"cpu_percent": medians, "cpu_total": sum(medians.values())}


def cpu_text(job: dict[str, Any], least: float = 2.0) -> str:
    """``kube-apiserver 98 %, etcd 21 %, ... (all 190 % of one core)``, largest first, those under ``least``
    percent of one core left out of the list (not out of the total)."""
    shown = [f"{label} {value:.0f} %" for label, value in sorted(job["cpu_percent"].items(), key=lambda kv: -kv[1])
             if value >= least]
    return f"{', '.join(shown)} (all {job['cpu_total']:.0f} % of one core)"


def b5_writes(results: dict[str, Any]) -> list[dict[str, Any]]:
    """B5's writes by verb and resource, and by user agent, of each operator's last round."""
    out = []
    for setting in results["meta"]["settings"]:
        for kind in ("go", "ours"):
            runs = [r for r in runs_of(results, kind, setting) if r.get("b5")]
            if runs:
                last = runs[-1]
                out.append({"operator": kind, "setting": setting, "round": last["round"],
                            "writes": last["b5"]["writes"], "user_agents": last["b5"]["user_agents"]})
    return out


def b5_text(entries: list[dict[str, Any]]) -> list[str]:
    out = []
    for entry in entries:
        detail = ", ".join(f"{k} {n}" for k, n in sorted(entry["writes"].items()))
        agents = "; ".join(f"`{a}` {n}" for a, n in sorted(entry["user_agents"].items()))
        out.append(f"- {NAMES[entry['operator']]}, {entry['setting']}, round {entry['round']}: {detail} "
                   f"(user agents: {agents})")
    return out


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
