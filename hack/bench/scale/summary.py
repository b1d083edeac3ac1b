"""The scale part of docs/benchmarks.md's summary (``scale.json``): a row per scenario, size and operator (medians
(min-max) over the rounds), the ratios taken within each round, each target met or missed, and the overflow."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from hack.bench.figures import show, source_line, stat

Run = dict[str, Any]
SCENARIOS = {"one": "one job of {workers:,} workers", "many": "{jobs:,} jobs of {workers} workers at once"}
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
FLOOR_LABEL = "API server floor (raw client)"
FLOOR_SERVICE_LABEL = "floor with each job's Service (raw client)"
FLOOR_KINDS = ("floor", "floor-service")


def writes_per_pod(run: Run) -> float:
    writes = sum(count for request, count in run.get("requests", {}).items() if request.split()[0] in WRITE_VERBS)
    return float(writes) / float(run["pods"])


def label(kind: str, scale: dict[str, Any]) -> str:
    return {"go": f"Go {scale['peer_version']}", "ours": "ours", "floor": FLOOR_LABEL,
            "floor-service": FLOOR_SERVICE_LABEL}[kind]


def runs_of(scale: dict[str, Any], kind: str, scenario: str, workers: int | None = None) -> list[Run]:
    return [r for r in scale["runs"] if r["operator"] == kind and r["scenario"] == scenario
            and (workers is None or r["workers"] == workers)]


def row(scale: dict[str, Any], kind: str, scenario: str, workers: int) -> str | None:
    got = runs_of(scale, kind, scenario, workers)
    if not got:
        return None
    first = got[0]
    name = SCENARIOS[scenario].format(jobs=first["jobs"], workers=first["workers"])
    per_pod = show(stat([r["all_created"] * 1000 / r["pods"] for r in got]), 2)
    common = (f"| {name} | {label(kind, scale)} | {show(stat([r['created'] for r in got]), 0, sep=True)} "
              f"({show(stat([r['already_exists'] for r in got]), 0, sep=True)}) "
              f"| {show(stat([r['all_created'] for r in got]), 1)} | {show(stat([r['all_running'] for r in got]), 1)} "
              f"| {per_pod} ")
    if kind in FLOOR_KINDS:
        slices = show(stat([r["endpoint_slices"] for r in got if "endpoint_slices" in r]), 0)
        return common + f"| - | - | - | {slices} | - |"
    requests = statistics.median(sum(r["requests"].values()) for r in got)
    return (common + f"| {show(stat([r['cpu_per_1000_pods'] for r in got]), 2)} "
            f"| {show(stat([r['peak_rss_kb'] / 1024 for r in got]), 1)} "
            f"| {show(stat([r['configmap_writes'] for r in got]), 0, sep=True)}, "
            f"{show(stat([r['configmap_bytes'] for r in got]), 0, sep=True)} "
            f"| {show(stat([r['endpoint_slices'] for r in got]), 0)} "
            f"| {requests:,.0f} ({show(stat([writes_per_pod(r) for r in got]), 2)}) |")


def paired(scale: dict[str, Any], scenario: str, workers: int, kinds: tuple[str, str],
           value: Callable[[Run], float]) -> list[float]:
    """``value(first) / value(second)`` in each round that measured both."""
    by_round: dict[int, dict[str, Run]] = {}
    for kind in kinds:
        for run in runs_of(scale, kind, scenario, workers):
            by_round.setdefault(run["round"], {})[kind] = run
    return [value(pair[kinds[0]]) / value(pair[kinds[1]]) for pair in by_round.values()
            if len(pair) == 2 and value(pair[kinds[1]])]


def ratio(values: list[float]) -> str:
    return show(stat(values), 2, unit="x") if values else "-"


def ratio_line(scale: dict[str, Any], scenario: str, workers: int) -> str:
    """Ours against Go and both against the floor for one scenario and size, each a median of the rounds' ratios;
    empty when no round measured two of them."""
    def against(kinds: tuple[str, str], value: Callable[[Run], float]) -> str:
        return ratio(paired(scale, scenario, workers, kinds, value))

    created = lambda r: float(r["all_created"])  # noqa: E731
    parts = [f"{what} {text}" for what, text in (
        ("all created", against(("ours", "go"), created)),
        ("all Running", against(("ours", "go"), lambda r: float(r["all_running"]))),
        ("CPU per pod", against(("ours", "go"), lambda r: float(r["cpu"]))),
        ("peak RSS", against(("ours", "go"), lambda r: float(r["peak_rss_kb"]))),
        ("API writes per pod", against(("ours", "go"), writes_per_pod))) if text != "-"]
    floor = [f"{who} {text}" for who, text in (("ours", against(("ours", "floor"), created)),
                                                ("Go", against(("go", "floor"), created)),
                                                ("ours against the floor with the Service",
                                                 against(("ours", "floor-service"), created))) if text != "-"]
    if not parts and not floor:
        return ""
    first = runs_of(scale, "ours", scenario, workers) or runs_of(scale, "go", scenario, workers)
    name = SCENARIOS[scenario].format(jobs=first[0]["jobs"], workers=workers) if first else scenario
    text = f"- {name}: " + (f"ours against Go: {', '.join(parts)}" if parts else "")
    if floor:
        text += ("; " if parts else "") + f"time to all created against the floor's (W / C_sched): {', '.join(floor)}"
    return text + "."


def per_pod_growth(scale: dict[str, Any], kind: str, small: int, large: int) -> float | None:
    """The median time to all created per pod at W = ``large`` over W = ``small`` (1.0 is flat); None unmeasured."""
    per_pod = {w: [r["all_created"] / r["pods"] for r in runs_of(scale, kind, "one", w)] for w in (small, large)}
    if not per_pod[small] or not per_pod[large]:
        return None
    return float(statistics.median(per_pod[large]) / statistics.median(per_pod[small]))


def flat_cost_line(scale: dict[str, Any], sizes: list[int]) -> str:
    """Time per pod at the largest W over the smallest, per operator (the rounds' medians)."""
    if len(sizes) < 2:
        return ""
    small, large = sizes[0], sizes[-1]
    parts = [f"{label(kind, scale)} {growth:.2f}x" for kind in ("ours", "go", *FLOOR_KINDS)
             if (growth := per_pod_growth(scale, kind, small, large)) is not None]
    return (f"- Cost per pod, time to all created per pod at W = {large:,} over W = {small:,} (1.00x is flat): "
            f"{', '.join(parts)}.") if parts else ""


# (what, the runs' value, the bound ours/Go's median ratio must stay within, "below" when it must stay under it)
GO_TARGETS: tuple[tuple[str, Callable[[Run], float], float, bool], ...] = (
    ("time to all created", lambda r: float(r["all_created"]), 1.0, True),
    ("time to all Running", lambda r: float(r["all_running"]), 1.0, True),
    ("peak RSS", lambda r: float(r["peak_rss_kb"]), 1.0, True),
    ("API writes per pod", writes_per_pod, 1.0, False),
    ("CPU-seconds per pod", lambda r: float(r["cpu"]) / float(r["pods"]), 1.0, False),
)
FLOOR_TARGET = 1.15  # ours' time to all created within this of the floor's, at the largest W
FLAT_TARGET = 1.2  # ours' time per pod at the largest W within this of the smallest W's


def verdict(met: bool) -> str:
    return "met" if met else "**missed**"


def target_lines(scale: dict[str, Any], sizes: list[int], many: list[int]) -> list[str]:
    """Each target against the medians of the rounds' ratios: met or missed, and where it was missed."""
    cases = [("one", w) for w in sizes] + [("many", w) for w in many]
    name = {case: SCENARIOS[case[0]].format(jobs=(runs_of(scale, "ours", *case) or [{"jobs": 0}])[0]["jobs"],
                                            workers=case[1]) for case in cases}
    lines = []
    for what, value, bound, strictly in GO_TARGETS:
        medians = {case: statistics.median(found) for case in cases
                   if (found := paired(scale, case[0], case[1], ("ours", "go"), value))}
        if not medians:
            continue
        missed = [f"{name[case]} {m:.2f}x" for case, m in medians.items() if (m >= bound if strictly else m > bound)]
        rule = "below" if strictly else "at most"
        lines.append(f"- Ours' {what} {rule} the Go operator's at every size: {verdict(not missed)}"
                     + (f" ({', '.join(missed)})" if missed else "") + ".")
    if sizes:
        large = sizes[-1]
        floor = paired(scale, "one", large, ("ours", "floor"), lambda r: float(r["all_created"]))
        if floor:
            at = statistics.median(floor)
            lines.append(f"- Ours within {FLOOR_TARGET:.2f}x of the API server's floor at W = {large:,} (time to all "
                         f"created): {at:.2f}x, {verdict(at <= FLOOR_TARGET)}.")
        with_service = paired(scale, "one", large, ("ours", "floor-service"), lambda r: float(r["all_created"]))
        if with_service:
            at = statistics.median(with_service)
            lines.append(f"- The same against the floor with the job's Service: {at:.2f}x, "
                         f"{verdict(at <= FLOOR_TARGET)}.")
    if len(sizes) >= 2 and (flat := per_pod_growth(scale, "ours", sizes[0], sizes[-1])) is not None:
        lines.append(f"- Ours' cost per pod flat, W = {sizes[-1]:,} within {FLAT_TARGET:.1f}x of W = {sizes[0]:,}: "
                     f"{flat:.2f}x, {verdict(flat <= FLAT_TARGET)}.")
    return ["Targets (medians of the rounds' ratios):", "", *lines, ""] if lines else []


def overflow_lines(scale: dict[str, Any]) -> list[str]:
    runs = [r for r in scale["runs"] if r["scenario"] == "overflow"]
    if not runs:
        return []
    first = runs[0]
    lines = [f"A job whose ConfigMap cannot fit: {first['workers']:,} workers, a {first['namespace_length']}-character "
             f"namespace, a {first['name_length']}-character name (its hostfile and discover_hosts.sh pass 1 MiB):",
             "", "| operator | at `kubectl apply` (the POST) | then |", "|---|---|---|"]
    seen = set()
    for run in runs:
        key = (run["operator"], run.get("variant", ""))
        if key in seen:
            continue
        seen.add(key)
        who = label(run["operator"], scale) + {"webhook": ", webhook on", "reconciler": ", reconciler alone"}.get(
            key[1], "")
        if run["post_code"] != 201:
            lines.append(f"| {who} | refused ({run['post_code']}): {run['post_message'][:300]} | nothing created |")
            continue
        failed = next((c for c in run["conditions"] if c["type"] == "Failed" and c["status"] == "True"), None)
        if failed:
            then = f"Failed ({failed['reason']}) in {run['seconds_watched']:.0f} s: {str(failed['message'])[:300]}"
        elif run["log_line"]:
            then = (f"the ConfigMap refused {run['seconds_watched']:.0f} s after the POST, the job not failed "
                    f"(conditions: {', '.join(c['type'] for c in run['conditions']) or 'none'}); its log: "
                    f"{run['log_line'][:300]}")
        else:
            then = (f"nothing said in {run['seconds_watched']:.0f} s (conditions: "
                    f"{', '.join(c['type'] for c in run['conditions']) or 'none'})")
        lines.append(f"| {who} | accepted (201) | {then}; {run['pods']:,} pods by then |")
    return [*lines, ""]


def scale_lines(scale: dict[str, Any]) -> list[str]:
    """The scale results: their source, a table row per scenario, size and operator, the ratios and the overflow."""
    sizes = sorted({r["workers"] for r in scale["runs"] if r["scenario"] == "one"})
    lines = [
        source_line("`scale.json`, ours and the Go mpi-operator at scale, each alone in turn", scale),
        f"  Both operators `{scale['operator_flags']}`; {scale['control_plane']}; {scale.get('nodes', 'kwok nodes')}; "
        f"audit log on. CPU: {scale['cpu_method']}.",
        *(f"  Note: {note}" for note in scale.get("notes", [])),
        "",
        "| scale scenario | operator | pods created (409 AlreadyExists) | POST to all created, s | to all Running, s "
        "| ms per pod to all created | CPU-s per 1,000 pods | peak RSS, MiB | ConfigMap writes, bytes | EndpointSlices "
        "| the operator's requests (writes per pod) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    many = sorted({r["workers"] for r in scale["runs"] if r["scenario"] == "many"})
    for scenario, scenario_sizes in (("one", sizes), ("many", many)):
        for workers in scenario_sizes:
            for kind in ("go", "ours", *FLOOR_KINDS):
                if (found := row(scale, kind, scenario, workers)) is not None:
                    lines.append(found)
    lines.append("")
    extra = [*(ratio_line(scale, scenario, workers) for scenario, scenario_sizes in (("one", sizes), ("many", many))
               for workers in scenario_sizes), flat_cost_line(scale, sizes)]
    if any(extra):
        lines += ["Within each round (medians (min-max) of the rounds' ratios; below 1 is ours cheaper or faster):",
                  "", *(line for line in extra if line), ""]
    return [*lines, *target_lines(scale, sizes, many), *overflow_lines(scale)]


# ---- the worker backends side by side (``--compare-backends``: scale-backends.json)
BACKENDS = {"ours": "Pods (ours creates the workers)", "ours-indexed": "IndexedJob (the Job controller creates them)"}
KCM_LABELS = {"default": "defaults (20 QPS, burst 30)", "raised": "raised (200 QPS, burst 400)"}


def backend_runs(data: dict[str, Any], kind: str, workers: int, limits: str) -> list[Run]:
    return [r for r in runs_of(data, kind, "one", workers) if r.get("kcm_limits") == limits]


def backend_row(data: dict[str, Any], kind: str, workers: int, limits: str) -> str | None:
    got = backend_runs(data, kind, workers, limits)
    if not got:
        return None
    made_by: list[dict[str, int]] = [r.get("creator_requests") or r["requests"] for r in got]
    creator_writes = [sum(n for request, n in made.items() if request.split()[0] in WRITE_VERBS) / r["pods"]
                      for made, r in zip(made_by, got, strict=True)]
    return (f"| {workers:,} | {KCM_LABELS[limits]} | {BACKENDS[kind]} "
            f"| {show(stat([r['created'] for r in got]), 0, sep=True)} "
            f"| {show(stat([r['all_created'] for r in got]), 1)} | {show(stat([r['all_running'] for r in got]), 1)} "
            f"| {show(stat([r['all_created'] * 1000 / r['pods'] for r in got]), 2)} "
            f"| {show(stat([float(sum(r['requests'].values())) for r in got]), 0, sep=True)} "
            f"| {show(stat(creator_writes), 2)} |")


def backend_ratio_lines(data: dict[str, Any], sizes: list[int], limits: list[str]) -> list[str]:
    """IndexedJob over Pods, per size and KCM setting (the medians' ratio)."""
    lines = []
    for workers in sizes:
        for setting in limits:
            pods, indexed = (backend_runs(data, k, workers, setting) for k in ("ours", "ours-indexed"))
            if not pods or not indexed:
                continue
            def over(key: str, indexed: list[Run] = indexed, pods: list[Run] = pods) -> float:
                return float(statistics.median(r[key] for r in indexed) / statistics.median(r[key] for r in pods))

            parts = [f"{what} {over(key):.2f}x" for what, key in (("all created", "all_created"),
                                                                   ("all Running", "all_running"))]
            lines.append(f"- {workers:,} workers, kube-controller-manager {KCM_LABELS[setting]}: IndexedJob against "
                         f"Pods: {', '.join(parts)}.")
    return lines


def backends_lines(data: dict[str, Any]) -> list[str]:
    """The worker backends' trade-off: time from the MPIJob POST to every worker created and Running, per W, per
    kube-controller-manager client limits, Pods against IndexedJob."""
    sizes = sorted({r["workers"] for r in data["runs"] if r["scenario"] == "one"})
    limits = [k for k in KCM_LABELS if any(r.get("kcm_limits") == k for r in data["runs"])]
    lines = [
        source_line("`scale-backends.json`, the worker backends side by side (ours, Pods against IndexedJob)", data),
        f"  Ours `{data['operator_flags']}` in every run; {data['control_plane']}; {data.get('nodes', 'kwok nodes')}; "
        f"audit log on. Workers created: the pod creates answered 201 of whoever makes them (ours, or "
        f"kube-controller-manager's Job controller), from the audit log; load average (1, 5, 15 min) "
        f"{data.get('load_average', '-')} before, {data.get('load_average_after', '-')} after.",
        *(f"  Note: {note}" for note in data.get("notes", [])),
        "",
        "| workers | kube-controller-manager client limits | worker backend | pods created by the workers' creator "
        "(IndexedJob: the launcher's pod too) | POST to all created, s "
        "| to all Running, s | ms per worker to all created | ours' requests "
        "| the creator's writes per pod (IndexedJob: all of kube-controller-manager's, its Endpoints and "
        "EndpointSlices too) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for workers in sizes:
        for setting in limits:
            for kind in BACKENDS:
                if (found := backend_row(data, kind, workers, setting)) is not None:
                    lines.append(found)
    lines.append("")
    if ratios := backend_ratio_lines(data, sizes, limits):
        lines += ["Within each control plane (medians; above 1 is IndexedJob slower):", "", *ratios, ""]
    return lines


# ---- ours beside the floor with and without each job's Service (``--compare-floors``: scale-floors.json)
COMPONENTS = ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "etcd", "kwok")


def control_plane_cell(runs: list[Run]) -> str:
    """The control plane's CPU-seconds by component (medians over the rounds), from the POST until all Running."""
    return " / ".join(show(stat([r["control_plane_cpu"].get(name, 0.0) for r in runs]), 1) for name in COMPONENTS)


def floors_row(data: dict[str, Any], kind: str, workers: int) -> str | None:
    got = runs_of(data, kind, "one", workers)
    if not got:
        return None
    ours_cpu = show(stat([r["cpu"] for r in got]), 1) if kind == "ours" else "-"
    return (f"| {workers:,} | {label(kind, data)} | {show(stat([r['all_created'] for r in got]), 1)} "
            f"| {show(stat([r['all_running'] for r in got]), 1)} "
            f"| {show(stat([r['all_created'] * 1000 / r['pods'] for r in got]), 2)} "
            f"| {control_plane_cell(got)} | {ours_cpu} |")


def floors_ratio_lines(data: dict[str, Any], sizes: list[int]) -> list[str]:
    """Per size, ours over each floor within each round; per kind, the time per pod's growth over the sizes."""
    lines = []
    for workers in sizes:
        parts = []
        for floor in FLOOR_KINDS:
            created = paired(data, "one", workers, ("ours", floor), lambda r: float(r["all_created"]))
            running = paired(data, "one", workers, ("ours", floor), lambda r: float(r["all_running"]))
            if created:
                parts.append(f"against the {label(floor, data)}: all created {ratio(created)}, "
                             f"all Running {ratio(running)}")
        if parts:
            lines.append(f"- {workers:,} workers, ours {'; '.join(parts)}.")
    if len(sizes) >= 2:
        small, large = sizes[0], sizes[-1]
        growth = [f"{label(kind, data)} {g:.2f}x" for kind in ("ours", *FLOOR_KINDS)
                  if (g := per_pod_growth(data, kind, small, large)) is not None]
        if growth:
            lines.append(f"- Time to all created per pod at W = {large:,} over W = {small:,} (1.00x is flat): "
                         f"{', '.join(growth)}.")
    return lines


def floors_lines(data: dict[str, Any]) -> list[str]:
    """Ours beside the API server's floor with and without each job's headless Service, per W, with the CPU each
    control-plane component spent: what a job's Service costs the scheduler and the controller-manager."""
    sizes = sorted({r["workers"] for r in data["runs"] if r["scenario"] == "one"})
    lines = [
        source_line("`scale-floors.json`, ours beside the floor with and without each job's Service", data),
        f"  Ours `{data['operator_flags']}`; {data['control_plane']}; {data.get('nodes', 'kwok nodes')}; audit log "
        f"on. Control-plane CPU: utime + stime of each component's process from the first POST (the floors: the "
        f"first create) until every pod is Running.",
        *(f"  Note: {note}" for note in data.get("notes", [])),
        "",
        "| workers | run | to all created, s | to all Running, s | ms per pod to all created "
        f"| control-plane CPU-s: {' / '.join(COMPONENTS)} | ours' CPU-s |",
        "|---|---|---|---|---|---|---|",
    ]
    for workers in sizes:
        for kind in ("ours", *FLOOR_KINDS):
            if (found := floors_row(data, kind, workers)) is not None:
                lines.append(found)
    lines.append("")
    if ratios := floors_ratio_lines(data, sizes):
        lines += ["Within each round (medians (min-max) of the rounds' ratios):", "", *ratios, ""]
    return lines
