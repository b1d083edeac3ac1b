"""What a sync is configured with: the few options it reads, made once from the command line (options.py)."""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.mpijob.builders import GangScheduling
from reconciler.options import Options
from shared.api.worker_backend import WORKER_BACKEND_PODS


@dataclass(frozen=True)
class Settings:
    """The options a sync reads; the others configure the process around it (client, queue, leader election)."""

    cluster_domain: str = ""
    gang: GangScheduling | None = None
    max_concurrent_writes: int = 64  # worker creates and deletes in flight at once, for all the jobs being synced
    default_worker_backend: str = WORKER_BACKEND_PODS  # --default-worker-backend: jobs whose annotation says nothing

    @classmethod
    def from_options(cls, options: Options) -> Settings:
        return cls(options.cluster_domain, GangScheduling.from_flag(options.gang_scheduling),
                   options.max_concurrent_writes, options.default_worker_backend)
