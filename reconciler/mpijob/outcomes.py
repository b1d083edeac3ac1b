"""What one sync of an MPIJob did: ``SyncOutcome``, whose values are the ``outcome=`` of the controller's "sync"
log line (kept byte for byte: a ``StrEnum`` is its value wherever it is logged or compared)."""

from __future__ import annotations

from enum import StrEnum


class SyncOutcome(StrEnum):
    """How a sync ended without an error (an error is raised, and the sync retried)."""

    INVALID_KEY = "invalid key"  # not namespace/name
    NOT_FOUND = "not found"  # not in the cache: deleted
    DELETING = "deleting"  # has a deletionTimestamp: the garbage collector deletes its children
    INVALID = "invalid"  # fails upstream's validation or its v2-spec annotation's: an event, nothing else
    FINISHED = "finished"  # Succeeded or Failed with a completionTime: cleaned up only
    REFUSED = "refused"  # cannot run as specified (its ConfigMap too large): Failed, no child created
    RESTARTING = "restarting"  # failurePolicy: objects of an older attempt are being deleted, nothing created
    RESTARTED = "restarted"  # failurePolicy: restartCount raised (the commit point), the attempt torn down
    FAILED = "failed"  # failurePolicy: Failed by a FailJob rule or by maxRestarts
    SYNCED = "synced"  # every child ensured, the status they show written
    DELETED = "deleted"  # gone when its status was written: nothing left to report on


def managed_by(manager: str) -> str:
    """The outcome of a job another controller manages (``spec.runPolicy.managedBy``): not a ``SyncOutcome``
    because it names the manager."""
    return f"managed by {manager}"
