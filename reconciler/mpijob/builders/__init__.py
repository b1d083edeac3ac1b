"""Pure builders of every child object of an MPIJob, byte-compatible with upstream mpi-operator v0.8.2.

Each ``build_*`` takes the (defaulted) ``MPIJob`` and explicit parameters and returns a new JSON-ready
dict, exactly as it is POSTed to the API server. No I/O, no clock, no randomness; the result never
shares a mutable sub-object with the job, so callers may change it freely.
"""

from reconciler.mpijob.builders.child_object import controller_ref, replacing_merge_patch
from reconciler.mpijob.builders.config_map import (
    RunningWorker,
    build_config_map,
    build_config_map_data,
    build_discover_hosts,
    build_hostfile,
)
from reconciler.mpijob.builders.job_facts import calculate_min_available
from reconciler.mpijob.builders.launcher import (
    build_launcher_job,
    build_launcher_pod_template,
    sync_scheduling_directives,
    template_overrides_restart_policy,
)
from reconciler.mpijob.builders.min_resources import PriorityLookup, calculate_min_resources, no_priority_classes
from reconciler.mpijob.builders.native_gang import build_native_pod_group, build_workload, native_spec_differs
from reconciler.mpijob.builders.podgroup import (
    GangScheduling,
    build_pod_group,
    build_scheduler_plugins_pod_group,
    build_volcano_pod_group,
    calc_priority_class_name,
    decorate_pod_template,
    overridden_scheduler_name,
    pod_group_spec_update,
)
from reconciler.mpijob.builders.secret import (
    SSHKeyPair,
    build_ssh_secret,
    ssh_secret_data_patch,
    ssh_secret_has_key_pair,
)
from reconciler.mpijob.builders.service import build_service, service_spec_patch
from reconciler.mpijob.builders.worker import build_worker
from reconciler.mpijob.builders.worker_job import (
    build_worker_job,
    build_worker_job_template,
    parse_indexes,
    without_completed_indexes,
    worker_job_scale_patch,
)
from shared.api.config_map_size import CONFIG_MAP_MAX_BYTES, config_map_size, config_map_size_errors
from shared.api.worker_backend import worker_job_name

__all__ = [
    "CONFIG_MAP_MAX_BYTES",
    "GangScheduling",
    "PriorityLookup",
    "RunningWorker",
    "SSHKeyPair",
    "build_config_map",
    "build_config_map_data",
    "build_discover_hosts",
    "build_hostfile",
    "build_launcher_job",
    "build_launcher_pod_template",
    "build_native_pod_group",
    "build_pod_group",
    "build_scheduler_plugins_pod_group",
    "build_service",
    "build_ssh_secret",
    "build_volcano_pod_group",
    "build_worker",
    "build_worker_job",
    "build_worker_job_template",
    "build_workload",
    "calc_priority_class_name",
    "calculate_min_available",
    "calculate_min_resources",
    "config_map_size",
    "config_map_size_errors",
    "controller_ref",
    "decorate_pod_template",
    "native_spec_differs",
    "no_priority_classes",
    "overridden_scheduler_name",
    "parse_indexes",
    "pod_group_spec_update",
    "replacing_merge_patch",
    "service_spec_patch",
    "ssh_secret_data_patch",
    "ssh_secret_has_key_pair",
    "sync_scheduling_directives",
    "template_overrides_restart_policy",
    "without_completed_indexes",
    "worker_job_name",
    "worker_job_scale_patch",
]
