"""What the API server's audit log shows of a scale scenario: it cannot stop early, as a watch may under load."""

from __future__ import annotations

import collections
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from hack.devcluster.audit import audit_events, resource_of

OPERATOR_AGENT = "mpi-operator"  # both operators' user agents start so
KCM_AGENT = "kube-controller-manager/"  # its Job controller's, which creates the workers of the IndexedJob backend

AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  resources: [{group: "", resources: ["configmaps"]}]
- level: Metadata
"""


def audit_flags(directory: Path) -> tuple[list[str], Path]:
    """kube-apiserver flags for the audit log (batched, flushed within a second) and the log's path."""
    directory.mkdir(parents=True, exist_ok=True)
    policy = directory / "audit-policy.yaml"
    policy.write_text(AUDIT_POLICY)
    log = directory / "audit.log"
    return [f"--audit-policy-file={policy}", f"--audit-log-path={log}", "--audit-log-format=json",
            "--audit-log-mode=batch", "--audit-log-batch-max-wait=1s", "--audit-log-maxsize=0"], log


def stamp(text: str) -> float:
    """An audit timestamp (RFC 3339, microseconds) as seconds since the epoch."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def from_audit(log: Path, offset: int, namespaces: set[str], agent: str = OPERATOR_AGENT) -> dict[str, Any]:
    """What the audit log shows of a scenario in ``namespaces``: the first MPIJob POST, the pod creates of the
    client whose user agent starts with ``agent`` (201 and 409, the first and the last 201's times), its requests by
    verb and resource, its ConfigMap bytes."""
    first_post = first_create = math.inf
    last_create = 0.0
    creates: collections.Counter[int] = collections.Counter()
    requests: collections.Counter[str] = collections.Counter()
    config_bytes = config_writes = 0
    for event in audit_events(log, offset=offset):
        ref = event.get("objectRef") or {}
        if event.get("stage") != "ResponseComplete" or ref.get("namespace") not in namespaces:
            continue
        verb, resource = str(event.get("verb")), resource_of(event)
        code = int((event.get("responseStatus") or {}).get("code", 0))
        if verb == "create" and resource == "mpijobs" and code == 201:
            first_post = min(first_post, stamp(event["requestReceivedTimestamp"]))
        if not str(event.get("userAgent", "")).startswith(agent):
            continue
        requests[f"{verb} {resource}"] += 1
        if verb == "create" and resource == "pods":
            creates[code] += 1
            if code == 201:
                first_create = min(first_create, stamp(event["requestReceivedTimestamp"]))
                last_create = max(last_create, stamp(event["stageTimestamp"]))
        if resource == "configmaps" and verb in ("create", "update", "patch") and code < 300:
            config_writes += 1
            config_bytes += len(orjson.dumps(event.get("requestObject")))
    return {"first_post": first_post, "first_create": first_create, "last_create": last_create, "created": creates[201],
            "already_exists": creates[409], "create_codes": {str(k): v for k, v in sorted(creates.items())},
            "requests": dict(sorted(requests.items())), "configmap_writes": config_writes,
            "configmap_bytes": config_bytes}


