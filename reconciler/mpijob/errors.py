"""The errors a sync raises, and how each is handled (design rule 5).

Spec problems are data, never exceptions: a job that fails validation gets one ValidationError Warning event
and is not retried; one whose hostfile cannot fit in a ConfigMap is refused (Failed). Everything a sync
raises reaches ``Controller.process``, which logs it and requeues the job's key with per-key backoff::

    Exception
    ├── ApiError (runtime/client.py)   the API server answered with an error status
    │     404 NotFound                     on the job's status write: the job is gone, the sync is done;
    │                                      on a child's delete or lookup: nothing to do (neither raised)
    │     409 AlreadyExists                on a create: not raised, the object is read and checked (ensure.py)
    │     409 Conflict                     a write on a stale cache: requeued quietly (an info line)
    │     any other status                 requeued
    ├── ResourceExistsError            a child's name is taken by an object the job does not control:
    │                                  one ErrResourceExists Warning event per sync, a warning line, requeued
    ├── CreateFailedError              the API refused a worker create: the WorkersReady condition names the
    │                                  refusal, then the sync raises the ApiError it carries (above)
    └── aiohttp.ClientError, OSError   the API server cannot be reached: a warning line, requeued

Anything else is a bug: logged with its traceback, and requeued.
"""

from __future__ import annotations

from reconciler.mpijob.status import Event
from reconciler.runtime.client import ApiError
from shared.api import constants as c
from shared.jsondict import JSONDict


class ResourceExistsError(Exception):
    """An object with one of the job's names exists and is not controlled by the job (upstream's message)."""

    def __init__(self, name: str, kind: str) -> None:
        super().__init__(f'Resource "{name}" of Kind "{kind}" already exists and is not managed by MPIJob')

    @property
    def event(self) -> Event:
        return Event("Warning", c.REASON_RESOURCE_EXISTS, str(self))


class CreateFailedError(Exception):
    """The API refused a worker create (a quota, an admission webhook): the error, and the workers that exist."""

    def __init__(self, error: ApiError, existing: list[JSONDict]) -> None:
        super().__init__(str(error))
        self.error, self.existing = error, existing
