"""The API server's audit log, for tests that check who wrote what (least privilege, leader election).

``audit_flags`` turns it on at Metadata level (no request or response bodies, so no Secret data) in
``blocking`` mode, so that an event is in the file by the time the request has been answered.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson

from shared.jsondict import JSONDict

POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
"""
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


def audit_flags(directory: Path) -> tuple[list[str], Path]:
    """The kube-apiserver flags for an audit log in ``directory``, and the log's path."""
    directory.mkdir(parents=True, exist_ok=True)
    policy = directory / "audit-policy.yaml"
    policy.write_text(POLICY)
    log = directory / "audit.log"
    return [f"--audit-policy-file={policy}", f"--audit-log-path={log}", "--audit-log-format=json",
            "--audit-log-mode=blocking", "--audit-log-maxsize=0"], log


def audit_events(log: Path, *, offset: int = 0) -> Iterator[JSONDict]:
    """The events of the log from byte ``offset`` on (a test remembers ``log.stat().st_size`` first).

    The API server may be half-way through writing a line when the size is taken or the log is read: a line
    that began before ``offset`` belongs to the events before it and is skipped, and so is a last line
    without its newline yet (it is read whole next time)."""
    if not log.exists():
        return
    with log.open("rb") as stream:
        if offset > 0:
            stream.seek(offset - 1)
            if stream.read(1) != b"\n":
                stream.readline()  # the rest of a line that began before the offset
        for line in stream:
            if line.endswith(b"\n") and line.strip():
                yield orjson.loads(line)


def resource_of(event: JSONDict) -> str:
    """``pods``, ``mpijobs/status``, ... of an audit event."""
    ref = event.get("objectRef") or {}
    return str(ref.get("resource", "")) + ("/" + ref["subresource"] if ref.get("subresource") else "")
