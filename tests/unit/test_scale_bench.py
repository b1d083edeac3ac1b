"""hack/bench/scale reads its figures from the API server's audit log: the first MPIJob POST, the operator's pod
creates by answer and the first and last one created, its requests by verb and resource, the ConfigMap bytes it
wrote; docs/benchmarks.md's summary shows a measured scale run: rows, ratios within each round, the cost per pod
against W, and what each operator does with a job whose ConfigMap cannot fit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from hack.bench.scale.__main__ import parse_args, scenarios_of, worker_creator
from hack.bench.scale.audit import from_audit, stamp
from hack.bench.scale.scenarios import bench_job, floor_jobs, floor_pods, floor_services, long_names
from hack.bench.scale.summary import backends_lines, floors_lines, scale_lines
from hack.devcluster.mpijobs import mpijob
from shared.api import MPIJob, defaulted_dict
from shared.api.config_map_size import largest_fitting_workers

OURS = "mpi-operator/0.1.0 (linux/x86_64) pid/42"


def event(verb: str, resource: str, code: int, at: str, *, namespace: str = "one", agent: str = OURS,
          body: Any = None, subresource: str = "") -> dict[str, Any]:
    ref = {"resource": resource, "namespace": namespace, **({"subresource": subresource} if subresource else {})}
    found = {"stage": "ResponseComplete", "verb": verb, "objectRef": ref, "userAgent": agent,
             "responseStatus": {"code": code}, "requestReceivedTimestamp": at, "stageTimestamp": at}
    if body is not None:
        found["requestObject"] = body
    return found


def test_the_figures_of_a_scenario_come_from_the_audit_log(tmp_path: Path) -> None:
    patch = {"data": {"discover_hosts.sh": "#!/bin/sh\necho w-0\n"}}
    events = [
        event("create", "mpijobs", 201, "2026-12-06T19:00:00.500000Z", agent="python/3.11 aiohttp"),
        event("create", "configmaps", 201, "2026-12-06T19:00:00.600000Z", body={"data": {"hostfile": "w-0 slots=1\n"}}),
        event("create", "pods", 201, "2026-12-06T19:00:01.000000Z"),
        event("create", "pods", 409, "2026-12-06T19:00:09.000000Z"),
        event("get", "pods", 200, "2026-12-06T19:00:09.100000Z"),
        event("create", "pods", 201, "2026-12-06T19:00:03.250000Z"),
        event("patch", "configmaps", 200, "2026-12-06T19:00:04.000000Z", body=patch),
        event("update", "mpijobs", 200, "2026-12-06T19:00:05.000000Z", subresource="status"),
        event("create", "pods", 201, "2026-12-06T19:00:30.000000Z", namespace="another"),
        event("patch", "pods", 200, "2026-12-06T19:00:31.000000Z", agent="kwok/v0.8.0", subresource="status"),
        {**event("create", "pods", 201, "2026-12-06T19:00:40.000000Z"), "stage": "ResponseStarted"},
    ]
    log = tmp_path / "audit.log"
    log.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    figures = from_audit(log, 0, {"one"})
    config_bytes = len(orjson.dumps({"data": {"hostfile": "w-0 slots=1\n"}})) + len(orjson.dumps(patch))
    assert figures == {
        "first_post": stamp("2026-12-06T19:00:00.500000Z"), "first_create": stamp("2026-12-06T19:00:01.000000Z"),
        "last_create": stamp("2026-12-06T19:00:03.250000Z"),
        "created": 2, "already_exists": 1, "create_codes": {"201": 2, "409": 1},
        "requests": {"create configmaps": 1, "create pods": 3, "get pods": 1, "patch configmaps": 1,
                     "update mpijobs/status": 1},
        "configmap_writes": 2, "configmap_bytes": config_bytes,
    }
    assert figures["last_create"] - figures["first_post"] == 2.75


def test_the_floor_is_counted_from_its_own_client(tmp_path: Path) -> None:
    """The raw client's creates are told from the operator's by user agent; the floor is timed from its first."""
    raw = "Python/3.11 aiohttp/3.11.18"
    events = [
        event("create", "pods", 201, "2026-12-06T19:00:02.000000Z"),
        event("create", "pods", 201, "2026-12-06T19:00:01.000000Z", agent=raw),
        event("create", "pods", 201, "2026-12-06T19:00:04.500000Z", agent=raw),
    ]
    log = tmp_path / "audit.log"
    log.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    figures = from_audit(log, 0, {"one"}, agent="Python/")
    assert (figures["created"], figures["requests"]) == (2, {"create pods": 2})
    assert figures["last_create"] - figures["first_create"] == 3.5


def test_the_floors_pods_are_the_workers_the_reconciler_builds_without_an_owner() -> None:
    pod = floor_pods(floor_jobs("scale", 1, 3), 3)(2)
    assert pod["metadata"] == {
        "name": "bench-worker-2", "namespace": "scale", "ownerReferences": [],
        "labels": {"training.kubeflow.org/operator-name": "mpi-operator", "training.kubeflow.org/job-name": "bench",
                   "training.kubeflow.org/job-role": "worker", "training.kubeflow.org/replica-index": "2"}}
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("bench-worker-2", "bench")


def test_the_floors_pods_of_many_jobs_are_each_jobs_workers_and_each_job_has_its_service() -> None:
    jobs = floor_jobs("scale", 3, 4)
    pod = floor_pods(jobs, 4)(9)
    assert (pod["metadata"]["name"], pod["metadata"]["labels"]["training.kubeflow.org/job-name"],
            pod["spec"]["subdomain"]) == ("j0002-worker-1", "j0002", "j0002")
    services = floor_services(jobs)
    assert services[2] == {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "j0002", "namespace": "scale", "ownerReferences": [],
                     "labels": {"app": "j0002"}},
        "spec": {"clusterIP": "None", "selector": {"training.kubeflow.org/operator-name": "mpi-operator",
                                                   "training.kubeflow.org/job-name": "j0002"}}}
    assert [s["metadata"]["name"] for s in services] == ["j0000", "j0001", "j0002"]


def test_the_overflow_job_cannot_fit_and_the_sizes_run_in_order() -> None:
    namespace, name = long_names(6000)
    assert (len(namespace), len(name)) == (30, 40)
    job = MPIJob.model_validate(defaulted_dict({**mpijob(name, 6000), "metadata": {"name": name,
                                                                                   "namespace": namespace}}))
    assert largest_fitting_workers(job) == 3877
    assert scenarios_of(parse_args([])) == [("one", 1, 1000), ("one", 1, 10000), ("many", 1000, 4),
                                            ("overflow", 1, 6000)]
    assert scenarios_of(parse_args(["--scenarios", "one", "--workers", "64,512"])) == [("one", 1, 64), ("one", 1, 512)]


def scale_run(kind: str, created: float, running: float, *, workers: int = 10000, round_: int = 0,
              cpu: float = 30.0) -> dict[str, Any]:
    return {"operator": kind, "scenario": "one", "round": round_, "jobs": 1, "workers": workers, "pods": workers,
            "workers_found": workers, "all_created": created, "all_running": running, "created": workers,
            "already_exists": 0, "create_codes": {"201": workers},
            "requests": {"create pods": workers, "get pods": 2}, "configmap_writes": 9, "configmap_bytes": 2_100_000,
            "cpu": cpu, "cpu_per_1000_pods": cpu * 1000 / workers, "peak_rss_kb": 100 * 1024, "rss_kb": 90 * 1024,
            "hwm_kb": 100 * 1024, "endpoint_slices": 101, "endpoints": workers + 1}


def floor_run(created: float, running: float, *, workers: int = 10000, round_: int = 0,
              kind: str = "floor") -> dict[str, Any]:
    run = {"operator": kind, "scenario": "one", "round": round_, "jobs": 1, "workers": workers, "pods": workers,
           "created": workers, "already_exists": 0, "all_created": created, "all_running": running,
           "creates_per_second": workers / created}
    return {**run, "endpoint_slices": 101, "endpoints": workers} if kind == "floor-service" else run


SCALE = {"benchmark": "scale", "provenance": "measured", "date": "2026-12-06 20:00 UTC", "commit": "abc1234",
         "command": "python -m hack.bench.scale --rounds 1", "rounds": 1, "machine": "2 cores, Python 3.11.7",
         "operator_flags": "--kube-api-qps=1000 --kube-api-burst=1000", "peer_version": "v0.8.2",
         "control_plane": "raised", "cpu_method": "utime+stime", "nodes": "11 kwok nodes of 1000 pods", "notes": []}


def test_a_measured_scale_run_fills_the_summary() -> None:
    scale = {**SCALE, "runs": [scale_run("ours", 60.0, 120.0), scale_run("go", 300.0, 330.0), floor_run(50.0, 80.0)]}
    lines = scale_lines(scale)
    assert lines[0] == ("- `scale.json`, ours and the Go mpi-operator at scale, each alone in turn: "
                        "2026-12-06 20:00 UTC, commit abc1234, 1 rounds, 2 cores, Python 3.11.7; "
                        "`python -m hack.bench.scale --rounds 1`.")
    assert lines[4:] == [
        "|---|---|---|---|---|---|---|---|---|---|---|",
        "| one job of 10,000 workers | Go v0.8.2 | 10,000 (0) | 300.0 | 330.0 | 30.00 | 3.00 | 100.0 | 9, 2,100,000 "
        "| 101 | 10,002 (1.00) |",
        "| one job of 10,000 workers | ours | 10,000 (0) | 60.0 | 120.0 | 6.00 | 3.00 | 100.0 | 9, 2,100,000 | 101 "
        "| 10,002 (1.00) |",
        "| one job of 10,000 workers | API server floor (raw client) | 10,000 (0) | 50.0 | 80.0 | 5.00 | - | - | - "
        "| - | - |",
        "",
        "Within each round (medians (min-max) of the rounds' ratios; below 1 is ours cheaper or faster):",
        "",
        "- one job of 10,000 workers: ours against Go: all created 0.20x, all Running 0.36x, CPU per pod 1.00x, "
        "peak RSS 1.00x, API writes per pod 1.00x; time to all created against the floor's (W / C_sched): ours "
        "1.20x, Go 6.00x.",
        "",
        "Targets (medians of the rounds' ratios):",
        "",
        "- Ours' time to all created below the Go operator's at every size: met.",
        "- Ours' time to all Running below the Go operator's at every size: met.",
        "- Ours' peak RSS below the Go operator's at every size: **missed** (one job of 10,000 workers 1.00x).",
        "- Ours' API writes per pod at most the Go operator's at every size: met.",
        "- Ours' CPU-seconds per pod at most the Go operator's at every size: met.",
        "- Ours within 1.15x of the API server's floor at W = 10,000 (time to all created): 1.20x, **missed**.",
        "",
    ]


def test_ratios_pair_the_operators_within_each_round_and_the_cost_per_pod_is_compared_across_sizes() -> None:
    runs = [scale_run("ours", 2.0, 5.0, workers=1000, round_=0), scale_run("go", 10.0, 12.0, workers=1000, round_=0),
            scale_run("ours", 30.0, 60.0, round_=0), scale_run("go", 90.0, 100.0, round_=0),
            scale_run("ours", 24.0, 50.0, round_=1), scale_run("go", 120.0, 130.0, round_=1),
            scale_run("ours", 3.0, 6.0, workers=1000, round_=1), scale_run("go", 10.0, 12.0, workers=1000, round_=1)]
    lines = scale_lines({**SCALE, "rounds": 2, "runs": runs})
    assert [line for line in lines if line.startswith("- one job")] == [
        "- one job of 1,000 workers: ours against Go: all created 0.25x (0.20-0.30), all Running 0.46x (0.42-0.50), "
        "CPU per pod 1.00x, peak RSS 1.00x, API writes per pod 1.00x.",
        "- one job of 10,000 workers: ours against Go: all created 0.27x (0.20-0.33), all Running 0.49x (0.38-0.60), "
        "CPU per pod 1.00x, peak RSS 1.00x, API writes per pod 1.00x.",
    ]
    assert lines[-11] == ("- Cost per pod, time to all created per pod at W = 10,000 over W = 1,000 (1.00x is flat): "
                          "ours 1.08x, Go v0.8.2 1.05x.")
    assert lines[-3:] == [
        "- Ours' CPU-seconds per pod at most the Go operator's at every size: met.",
        "- Ours' cost per pod flat, W = 10,000 within 1.2x of W = 1,000: 1.08x, met.", ""]


def test_the_overflow_table_says_what_each_operator_did() -> None:
    common = {"scenario": "overflow", "round": 0, "workers": 6000, "namespace_length": 30, "name_length": 40}
    refused = "admission webhook denied: the ConfigMap would hold 1,623,815 bytes; at most 3,877 workers fit"
    runs = [
        {**common, "operator": "ours", "variant": "webhook", "post_code": 422, "post_message": refused},
        {**common, "operator": "ours", "variant": "reconciler", "post_code": 201, "seconds_watched": 1.2,
         "conditions": [{"type": "Created", "status": "True", "reason": "MPIJobCreated", "message": "created"},
                        {"type": "Failed", "status": "True", "reason": "ValidationError", "message": "too large"}],
         "warnings": ["ValidationError: too large"], "pods": 0, "log_line": ""},
        {**common, "operator": "go", "variant": "controller", "post_code": 201, "seconds_watched": 260.3,
         "conditions": [{"type": "Created", "status": "True", "reason": "MPIJobCreated", "message": "created"},
                        {"type": "Running", "status": "True", "reason": "MPIJobRunning", "message": "running"}],
         "warnings": [], "pods": 6000, "log_line": "E1206 ConfigMap \"x-config\" is invalid: []: Too long"},
    ]
    assert scale_lines({**SCALE, "runs": runs})[-8:] == [
        "A job whose ConfigMap cannot fit: 6,000 workers, a 30-character namespace, a 40-character name (its hostfile "
        "and discover_hosts.sh pass 1 MiB):",
        "",
        "| operator | at `kubectl apply` (the POST) | then |",
        "|---|---|---|",
        f"| ours, webhook on | refused (422): {refused} | nothing created |",
        "| ours, reconciler alone | accepted (201) | Failed (ValidationError) in 1 s: too large; 0 pods by then |",
        "| Go v0.8.2 | accepted (201) | the ConfigMap refused 260 s after the POST, the job not failed (conditions: "
        "Created, Running); its log: E1206 ConfigMap \"x-config\" is invalid: []: Too long; 6,000 pods by then |",
        "",
    ]


def test_the_workers_of_an_indexed_job_are_counted_from_the_job_controllers_creates(tmp_path: Path) -> None:
    """Under the IndexedJob backend kube-controller-manager creates the workers: its creates are counted, ours apart."""
    kcm = "kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/abc/job-controller"
    events = [
        event("create", "mpijobs", 201, "2026-12-06T19:00:00.500000Z", agent="Python/3.11 aiohttp"),
        event("create", "jobs", 201, "2026-12-06T19:00:00.700000Z"),
        event("create", "pods", 201, "2026-12-06T19:00:01.000000Z", agent=kcm),
        event("create", "pods", 201, "2026-12-06T19:00:51.000000Z", agent=kcm),
        event("create", "pods/binding", 201, "2026-12-06T19:00:52.000000Z", agent="kube-scheduler/v1.36.3"),
    ]
    log = tmp_path / "audit.log"
    log.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    made = from_audit(log, 0, {"one"}, agent=worker_creator("ours-indexed"))
    ours = from_audit(log, 0, {"one"}, agent=worker_creator("ours"))
    assert (made["created"], made["last_create"] - made["first_post"], made["requests"]) == (
        2, 50.5, {"create pods": 2})
    assert (ours["created"], ours["requests"]) == (0, {"create jobs": 1})
    args = parse_args(["--compare-backends", "--operators", "ours,ours-indexed", "--kcm-limits", "default,raised"])
    assert (args.compare_backends, args.kcm_limits, parse_args([]).kcm_limits, parse_args([]).operators) == (
        True, "default,raised", "raised", "go,ours,floor,floor-service")
    assert bench_job("bench", 2, hang_workers=True)["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"] == {
        "labels": {"test.mpijob/outcome": "hang"}}
    assert "metadata" not in bench_job("bench", 2)["spec"]["mpiReplicaSpecs"]["Worker"]["template"]


def backend_run(kind: str, limits: str, created: float, running: float, workers: int = 10000) -> dict[str, Any]:
    run = {**scale_run("ours", created, running, workers=workers), "operator": kind, "kcm_limits": limits,
           "requests": {"create jobs": 2, "update mpijobs/status": 8} if kind == "ours-indexed" else
           {"create pods": workers, "create jobs": 1, "update mpijobs/status": 9}}
    if kind == "ours-indexed":
        run["creator_requests"] = {"create pods": workers, "patch pods": workers, "get pods": 3}
    return run


def test_the_backends_summary_compares_pods_and_indexed_job_per_size_and_controller_manager_limits() -> None:
    data = {**SCALE, "benchmark": "scale-backends", "control_plane": "KCM defaults, then raised",
            "load_average": "3.00 2.00 1.00", "load_average_after": "4.00 3.00 2.00", "notes": ["one round"],
            "runs": [backend_run("ours", "default", 40.0, 90.0), backend_run("ours-indexed", "default", 500.0, 520.0),
                     backend_run("ours", "raised", 40.0, 80.0), backend_run("ours-indexed", "raised", 60.0, 100.0)]}
    lines = backends_lines(data)
    assert lines[0].startswith("- `scale-backends.json`, the worker backends side by side")
    assert lines[1].endswith("load average (1, 5, 15 min) 3.00 2.00 1.00 before, 4.00 3.00 2.00 after.")
    assert lines[2:] == [
        "  Note: one round",
        "",
        "| workers | kube-controller-manager client limits | worker backend | pods created by the workers' creator "
        "(IndexedJob: the launcher's pod too) | POST to all created, s "
        "| to all Running, s | ms per worker to all created | ours' requests "
        "| the creator's writes per pod (IndexedJob: all of kube-controller-manager's, its Endpoints and "
        "EndpointSlices too) |",
        "|---|---|---|---|---|---|---|---|---|",
        "| 10,000 | defaults (20 QPS, burst 30) | Pods (ours creates the workers) | 10,000 | 40.0 | 90.0 | 4.00 "
        "| 10,010 | 1.00 |",
        "| 10,000 | defaults (20 QPS, burst 30) | IndexedJob (the Job controller creates them) | 10,000 | 500.0 "
        "| 520.0 | 50.00 | 10 | 2.00 |",
        "| 10,000 | raised (200 QPS, burst 400) | Pods (ours creates the workers) | 10,000 | 40.0 | 80.0 | 4.00 "
        "| 10,010 | 1.00 |",
        "| 10,000 | raised (200 QPS, burst 400) | IndexedJob (the Job controller creates them) | 10,000 | 60.0 | 100.0 "
        "| 6.00 | 10 | 2.00 |",
        "",
        "Within each control plane (medians; above 1 is IndexedJob slower):",
        "",
        "- 10,000 workers, kube-controller-manager defaults (20 QPS, burst 30): IndexedJob against Pods: all created "
        "12.50x, all Running 5.78x.",
        "- 10,000 workers, kube-controller-manager raised (200 QPS, burst 400): IndexedJob against Pods: all created "
        "1.50x, all Running 1.25x.",
        "",
    ]


def with_control_plane(run: dict[str, Any], apiserver: float, scheduler: float, kcm: float) -> dict[str, Any]:
    return {**run, "control_plane_cpu": {"kube-apiserver": apiserver, "kube-scheduler": scheduler,
                                         "kube-controller-manager": kcm, "etcd": 5.0, "kwok": 10.0}}


def test_the_floors_summary_sets_ours_beside_the_floor_with_and_without_the_service() -> None:
    runs = []
    for round_, slower in ((0, 1.0), (1, 1.2)):
        runs += [with_control_plane(scale_run("ours", 6.0 * slower, 12.0, workers=1000, round_=round_), 8.0, 2.0, 1.0),
                 with_control_plane(floor_run(5.0 * slower, 10.0, workers=1000, round_=round_), 7.0, 1.0, 0.5),
                 with_control_plane(floor_run(6.0 * slower, 12.0, workers=1000, round_=round_, kind="floor-service"),
                                    7.0, 2.0, 1.0),
                 with_control_plane(scale_run("ours", 60.0 * slower, 120.0, round_=round_), 50.0, 40.0, 30.0),
                 with_control_plane(floor_run(40.0 * slower, 80.0, round_=round_), 60.0, 10.0, 5.0),
                 with_control_plane(floor_run(60.0 * slower, 110.0, round_=round_, kind="floor-service"),
                                    45.0, 40.0, 30.0)]
    data = {**SCALE, "benchmark": "scale-floors", "rounds": 2, "runs": runs}
    lines = floors_lines(data)
    assert lines[0].startswith("- `scale-floors.json`, ours beside the floor with and without each job's Service: ")
    assert lines[2:] == [
        "",
        "| workers | run | to all created, s | to all Running, s | ms per pod to all created | control-plane CPU-s: "
        "kube-apiserver / kube-scheduler / kube-controller-manager / etcd / kwok | ours' CPU-s |",
        "|---|---|---|---|---|---|---|",
        "| 1,000 | ours | 6.6 (6.0-7.2) | 12.0 | 6.60 (6.00-7.20) | 8.0 / 2.0 / 1.0 / 5.0 / 10.0 | 30.0 |",
        "| 1,000 | API server floor (raw client) | 5.5 (5.0-6.0) | 10.0 | 5.50 (5.00-6.00) | 7.0 / 1.0 / 0.5 / 5.0 "
        "/ 10.0 | - |",
        "| 1,000 | floor with each job's Service (raw client) | 6.6 (6.0-7.2) | 12.0 | 6.60 (6.00-7.20) | 7.0 / 2.0 "
        "/ 1.0 / 5.0 / 10.0 | - |",
        "| 10,000 | ours | 66.0 (60.0-72.0) | 120.0 | 6.60 (6.00-7.20) | 50.0 / 40.0 / 30.0 / 5.0 / 10.0 | 30.0 |",
        "| 10,000 | API server floor (raw client) | 44.0 (40.0-48.0) | 80.0 | 4.40 (4.00-4.80) | 60.0 / 10.0 / 5.0 "
        "/ 5.0 / 10.0 | - |",
        "| 10,000 | floor with each job's Service (raw client) | 66.0 (60.0-72.0) | 110.0 | 6.60 (6.00-7.20) | 45.0 "
        "/ 40.0 / 30.0 / 5.0 / 10.0 | - |",
        "",
        "Within each round (medians (min-max) of the rounds' ratios):",
        "",
        "- 1,000 workers, ours against the API server floor (raw client): all created 1.20x, all Running 1.20x; "
        "against the floor with each job's Service (raw client): all created 1.00x, all Running 1.00x.",
        "- 10,000 workers, ours against the API server floor (raw client): all created 1.50x, all Running 1.50x; "
        "against the floor with each job's Service (raw client): all created 1.00x, all Running 1.09x.",
        "- Time to all created per pod at W = 10,000 over W = 1,000 (1.00x is flat): ours 1.00x, API server floor "
        "(raw client) 0.80x, floor with each job's Service (raw client) 1.00x.",
        "",
    ]


def test_the_scale_summary_shows_the_floor_with_the_service_and_judges_ours_against_both_floors() -> None:
    scale = {**SCALE, "runs": [scale_run("ours", 60.0, 120.0), floor_run(40.0, 80.0),
                               floor_run(55.0, 110.0, kind="floor-service")]}
    lines = scale_lines(scale)
    assert ("| one job of 10,000 workers | floor with each job's Service (raw client) | 10,000 (0) | 55.0 | 110.0 "
            "| 5.50 | - | - | - | 101 | - |") in lines
    assert ("- one job of 10,000 workers: time to all created against the floor's (W / C_sched): ours 1.50x, ours "
            "against the floor with the Service 1.09x.") in lines
    assert lines[-3:] == [
        "- Ours within 1.15x of the API server's floor at W = 10,000 (time to all created): 1.50x, **missed**.",
        "- The same against the floor with the job's Service: 1.09x, met.", ""]
