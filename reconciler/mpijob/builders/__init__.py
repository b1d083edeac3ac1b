"""Pure builders of every child object of an MPIJob, byte-compatible with upstream mpi-operator v0.8.2.

Each ``build_*`` takes the (defaulted) ``MPIJob`` and explicit parameters and returns a new JSON-ready
dict, exactly as it is POSTed to the API server. No I/O, no clock, no randomness; the result never
shares a mutable sub-object with the job, so callers may change it freely.
"""

from reconciler.mpijob.builders.common import controller_ref
from reconciler.mpijob.builders.config_map import (
    RunningWorker,
    build_config_map,
    build_config_map_data,
    build_discover_hosts,
    build_hostfile,
)
from reconciler.mpijob.builders.launcher import (
    RESTART_POLICY_OVERRIDDEN_MESSAGE,
    build_launcher_job,
    build_launcher_pod_template,
    sync_scheduling_directives,
    template_overrides_restart_policy,
)
from reconciler.mpijob.builders.min_resources import PriorityLookup, calculate_min_resources, no_priority_classes
from reconciler.mpijob.builders.podgroup import (
    GangScheduling,
    build_pod_group,
    build_scheduler_plugins_pod_group,
    build_volcano_pod_group,
    calc_priority_class_name,
    calculate_min_available,
    decorate_pod_template,
    overridden_scheduler_name,
)
from reconciler.mpijob.builders.secret import SSHKeyPair, build_ssh_secret, ssh_secret_needs_new_keys
from reconciler.mpijob.builders.service import build_service, service_needs_update
from reconciler.mpijob.builders.worker import build_worker

__all__ = [
    "RESTART_POLICY_OVERRIDDEN_MESSAGE",
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
    "build_pod_group",
    "build_scheduler_plugins_pod_group",
    "build_service",
    "build_ssh_secret",
    "build_volcano_pod_group",
    "build_worker",
    "calc_priority_class_name",
    "calculate_min_available",
    "calculate_min_resources",
    "controller_ref",
    "decorate_pod_template",
    "no_priority_classes",
    "overridden_scheduler_name",
    "service_needs_update",
    "ssh_secret_needs_new_keys",
    "sync_scheduling_directives",
    "template_overrides_restart_policy",
]
