"""hack/bench/scale.py reads its figures from the API server's audit log: the first MPIJob POST, the operator's pod
creates by answer and the last one created, its requests by verb and resource, the ConfigMap bytes it wrote; and
docs/benchmarks.md's summary shows a measured scale run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from hack.bench import doc as benchdoc
from hack.bench.scale import from_audit, stamp

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
        "first_post": stamp("2026-12-06T19:00:00.500000Z"), "last_create": stamp("2026-12-06T19:00:03.250000Z"),
        "created": 2, "already_exists": 1, "create_codes": {"201": 2, "409": 1},
        "requests": {"create configmaps": 1, "create pods": 3, "get pods": 1, "patch configmaps": 1,
                     "update mpijobs/status": 1},
        "configmap_writes": 2, "configmap_bytes": config_bytes,
    }
    assert figures["last_create"] - figures["first_post"] == 2.75


def scale_run(kind: str, created: float, running: float) -> dict[str, Any]:
    return {"operator": kind, "scenario": "one", "round": 0, "jobs": 1, "workers": 10000, "pods": 10000,
            "workers_found": 10000, "all_created": created, "all_running": running, "created": 10000,
            "already_exists": 0, "create_codes": {"201": 10000}, "requests": {"create pods": 10000, "get pods": 2},
            "configmap_writes": 9, "configmap_bytes": 2_100_000, "cpu": 30.0, "cpu_per_1000_pods": 3.0,
            "peak_rss_kb": 100 * 1024, "rss_kb": 90 * 1024, "hwm_kb": 100 * 1024, "endpoint_slices": 101,
            "endpoints": 10001}


def test_a_measured_scale_run_fills_the_summary() -> None:
    scale = {"benchmark": "scale", "provenance": "measured", "date": "2026-12-06 20:00 UTC", "commit": "abc1234",
             "command": "python -m hack.bench.scale --rounds 1", "rounds": 1, "machine": "2 cores, Python 3.11.7",
             "operator_flags": "--kube-api-qps=1000 --kube-api-burst=1000", "peer_version": "v0.8.2",
             "control_plane": "raised", "cpu_method": "utime+stime", "nodes": "11 kwok nodes of 1000 pods",
             "notes": [], "runs": [scale_run("ours", 60.0, 120.0), scale_run("go", 300.0, 330.0)]}
    lines = benchdoc.scale_lines(scale)
    assert lines[-3:] == [
        "| one job of 10,000 workers | Go v0.8.2 | 10,000 (0) | 300.0 | 330.0 | 3.00 | 100.0 | 9, 2,100,000 | 101 "
        "| 10,002 |",
        "| one job of 10,000 workers | ours | 10,000 (0) | 60.0 | 120.0 | 3.00 | 100.0 | 9, 2,100,000 | 101 "
        "| 10,002 |",
        "",
    ]
    assert lines[0] == ("- `scale.json`, ours and the Go mpi-operator at scale, each alone in turn: "
                        "2026-12-06 20:00 UTC, commit abc1234, 1 rounds, 2 cores, Python 3.11.7; "
                        "`python -m hack.bench.scale --rounds 1`.")
