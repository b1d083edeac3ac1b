"""The harness's audit-log reader copes with lines the API server is still writing."""

from __future__ import annotations

from pathlib import Path

from hack.devcluster.audit import audit_events


def test_events_from_an_offset_skip_the_line_it_cuts_and_a_line_still_being_written(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    first, second, third = b'{"n": 1}\n', b'{"n": 2}\n', b'{"n": 3}\n'
    log.write_bytes(first + second + third[:4])
    assert list(audit_events(log)) == [{"n": 1}, {"n": 2}], "the unfinished last line waits"
    assert list(audit_events(log, offset=len(first))) == [{"n": 2}], "an offset at a line's start keeps it"
    assert list(audit_events(log, offset=len(first) + 3)) == [], "a line begun before the offset is not read"
    log.write_bytes(first + second + third)
    assert list(audit_events(log, offset=len(first) + 3)) == [{"n": 3}]
    assert list(audit_events(tmp_path / "missing.log")) == []
