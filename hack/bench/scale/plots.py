"""The scale plot of docs/benchmarks.md: time and CPU per pod against W, for both operators and the API server's floor
(medians over the rounds, the bars their range)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

STYLE = {"go": ("tab:red", "s", "Go mpi-operator"), "ours": ("tab:blue", "o", "ours"),
         "floor": ("tab:gray", "^", "API server floor (raw client, C_sched)"),
         "floor-service": ("tab:green", "v", "floor with the job's Service (raw client)")}


def per_pod(results: dict[str, Any], kind: str, key: str, scale: float) -> tuple[list[int], list[float], list[float],
                                                                                list[float]]:
    """W, and the median, below-median and above-median spans of ``run[key] * scale / pods`` over the rounds of the
    one-job scenario."""
    sizes = sorted({r["workers"] for r in results["runs"] if r["operator"] == kind and r["scenario"] == "one"})
    xs, med, lo, hi = [], [], [], []
    for workers in sizes:
        values = [r[key] * scale / r["pods"] for r in results["runs"]
                  if r["operator"] == kind and r["scenario"] == "one" and r["workers"] == workers and key in r]
        if values:
            middle = statistics.median(values)
            xs.append(workers)
            med.append(middle)
            lo.append(middle - min(values))
            hi.append(max(values) - middle)
    return xs, med, lo, hi


def plot_per_pod(results: dict[str, Any], path: Path) -> Path:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, (time_ax, cpu_ax) = plt.subplots(1, 2, figsize=(11, 4.5), dpi=110)
    for kind, (color, marker, label) in STYLE.items():
        for ax, key, scale in ((time_ax, "all_created", 1000.0), (cpu_ax, "cpu", 1000.0)):
            xs, med, lo, hi = per_pod(results, kind, key, scale)
            if xs:
                ax.errorbar(xs, med, yerr=[lo, hi], color=color, marker=marker, capsize=3, label=label)
    time_ax.set(title="POST to every worker created, per pod", xlabel="workers in the job (W)",
                ylabel="milliseconds per pod", xscale="log")
    cpu_ax.set(title="operator CPU until all Running and idle", xlabel="workers in the job (W)",
               ylabel="CPU-seconds per 1,000 pods", xscale="log")
    for ax in (time_ax, cpu_ax):
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Scale, raised limits, {results['rounds']} round(s), {results['date']}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
