"""The MPIJob-owned part of the CRD schema (kubeflow.org/v2beta1), with upstream's types, enums and defaults."""

from __future__ import annotations

from typing import Any

from hack.gen.crdgen.structural import (
    LABEL_SELECTOR,
    POD,
    POD_TEMPLATE_SPEC,
    QUANTITY_PATTERN,
    Converter,
    field,
    int_or_string,
)

Schema = dict[str, Any]


def obj(description: str, properties: dict[str, Schema], **extra: Any) -> Schema:
    """An object schema with its properties in alphabetical order."""
    return field("object", description, properties=dict(sorted(properties.items())), **extra)


def mpijob_schema(conv: Converter) -> Schema:
    """The openAPIV3Schema of kind MPIJob."""
    return obj(
        "MPIJob runs an MPI program: one launcher pod runs mpirun, which starts the MPI processes on a "
        "set of worker pods over SSH.",
        {
            "apiVersion": conv.property_of(POD, "apiVersion"),
            "kind": conv.property_of(POD, "kind"),
            "metadata": {"type": "object"},
            "spec": spec_schema(conv),
            "status": status_schema(conv),
        },
    )


def spec_schema(conv: Converter) -> Schema:
    """MPIJobSpec."""
    return obj(
        "MPIJobSpec is the desired state of an MPIJob.",
        {
            "slotsPerWorker": field(
                "integer", "Number of MPI slots (processes) per worker, written into the hostfile. Defaults to 1.",
                format="int32", default=1),
            "runLauncherAsWorker": field(
                "boolean", "Whether the launcher pod also runs MPI processes: it is then listed first in the "
                "hostfile and in discover_hosts.sh. Defaults to false.", default=False),
            "runPolicy": run_policy_schema(),
            "mpiReplicaSpecs": field(
                "object", "The pod specifications, keyed by replica type: Launcher (required, exactly 1 "
                "replica) and Worker (optional, at least 1 replica). Other keys are ignored by the controller.",
                additionalProperties=replica_spec_schema(conv)),
            "sshAuthMountPath": field(
                "string", "Directory where the generated SSH keys are mounted in the first container of the "
                "launcher and of every worker. Defaults to /root/.ssh; when the containers run as a "
                "non-root user, set it to that user's ~/.ssh, e.g. /home/mpiuser/.ssh.",
                default="/root/.ssh"),
            "launcherCreationPolicy": field(
                "string", "When the launcher is created: AtStartup (the default) creates it together with the "
                "workers; WaitForWorkersReady creates it once every worker pod is Ready.", default="AtStartup"),
            "mpiImplementation": field(
                "string", "The MPI implementation used by the launcher's mpirun. It selects the hostfile "
                "format and the launcher environment variables: OpenMPI (the default), Intel or MPICH.",
                default="OpenMPI", enum=["OpenMPI", "Intel", "MPICH"]),
        },
        required=["mpiReplicaSpecs"],
    )


def run_policy_schema() -> Schema:
    """RunPolicy."""
    return obj(
        "RunPolicy holds the policies that apply to the job as a whole.",
        {
            "cleanPodPolicy": field(
                "string", "Which worker pods are deleted once the job has finished: Running (running and "
                "pending workers), All, or None (the default: every worker keeps running its sshd and holding "
                "its resources, GPUs included, until the MPIJob is deleted). Running suits most jobs."),
            "ttlSecondsAfterFinished": field(
                "integer", "Passed to the launcher Job: seconds after the launcher finishes before it and "
                "its pods are deleted. Unset means they are kept. The MPIJob itself is not deleted.",
                format="int32"),
            "activeDeadlineSeconds": field(
                "integer", "Passed to the launcher Job: seconds the launcher may run, counted from its "
                "start, before it is terminated and the job fails. Must not be negative.", format="int64"),
            "backoffLimit": field(
                "integer", "Passed to the launcher Job: number of launcher retries before the job fails "
                "(Kubernetes defaults it to 6). Must not be negative.", format="int32"),
            "schedulingPolicy": scheduling_policy_schema(),
            "suspend": field(
                "boolean", "Whether the job is suspended: the controller deletes the worker pods and suspends "
                "the launcher Job; setting it back to false recreates them. Defaults to false.", default=False),
            "managedBy": field(
                "string", "The controller that reconciles this job: kubeflow.org/mpi-operator (when unset) or "
                "kueue.x-k8s.io/multikueue. The MPI operator ignores a job managed by anything else. The "
                "field is meant to be immutable."),
        },
    )


def scheduling_policy_schema() -> Schema:
    """SchedulingPolicy (gang scheduling with volcano or scheduler-plugins)."""
    return obj(
        "SchedulingPolicy configures the PodGroup created for gang scheduling.",
        {
            "minAvailable": field(
                "integer", "Minimum number of pods that must be schedulable together (the PodGroup's "
                "minMember). Defaults to the number of workers plus one (the launcher); with launcherCreationPolicy "
                "WaitForWorkersReady, to the number of workers (the launcher starts once they are Ready).",
                format="int32"),
            "queue": field(
                "string", "volcano queue of the PodGroup. Falls back to the MPIJob annotation "
                "scheduling.volcano.sh/queue-name; ignored by scheduler-plugins."),
            "minResources": field(
                "object", "Minimum resources the PodGroup needs (scheduler-plugins minResources). Computed "
                "from the pod templates when unset.", additionalProperties=int_or_string(QUANTITY_PATTERN)),
            "priorityClass": field(
                "string", "PriorityClass of the PodGroup. Defaults to the priorityClassName of the launcher "
                "template, then of the worker template."),
            "scheduleTimeoutSeconds": field(
                "integer", "Seconds scheduler-plugins waits for the whole group to be scheduled; ignored by "
                "volcano.", format="int32"),
        },
    )


def replica_spec_schema(conv: Converter) -> Schema:
    """ReplicaSpec, with the full core/v1 PodTemplateSpec schema."""
    return obj(
        "ReplicaSpec describes the pods of one replica type.",
        {
            "replicas": field(
                "integer", "Number of pods. The launcher must have exactly 1 (the default); workers need at "
                "least 1 (an unset Worker replicas defaults to 0, which is rejected).", format="int32"),
            "restartPolicy": field(
                "string", "Restart policy of the pods, overriding the template's: OnFailure or Never. "
                "Defaults to OnFailure for the launcher and Never for workers."),
            "template": conv.ref(POD_TEMPLATE_SPEC, "The pod template of this replica type."),
        },
    )


def status_schema(conv: Converter) -> Schema:
    """JobStatus."""
    return obj(
        "JobStatus is the observed state of an MPIJob, written by the controller.",
        {
            "conditions": field(
                "array", "The job's conditions, at most one per type.", items=condition_schema(),
                **{"x-kubernetes-list-map-keys": ["type"], "x-kubernetes-list-type": "map"}),
            "replicaStatuses": field(
                "object", "Pod counts per replica type (Launcher, Worker).",
                additionalProperties=replica_status_schema(conv)),
            "startTime": field(
                "string", "When the controller started the job; reset when the job is resumed.",
                format="date-time"),
            "completionTime": field("string", "When the job finished.", format="date-time"),
            "lastReconcileTime": field("string", "Not set by the controller.", format="date-time"),
            "restartCount": field(
                "integer", "How many times the job was restarted by a RestartJob rule of its failurePolicy "
                "(kubeflow.org/v2). Set only on jobs with a failurePolicy.", format="int32"),
            "readyWorkers": field(
                "string", "Ready worker pods out of the requested, e.g. 2/8 (this operator's; the WorkersReady "
                          "condition says why the others are not ready). Updated with the condition."),
        },
    )


def condition_schema() -> Schema:
    """JobCondition."""
    return obj(
        "JobCondition describes one aspect of the job's state.",
        {
            "type": field("string", "Condition type: Created, Running, Restarting, Succeeded, Suspended or Failed "
                                    "(upstream's), or WorkersReady (this operator's, kept first in the list)."),
            "status": field("string", "Status of the condition: True, False or Unknown.",
                            enum=["True", "False", "Unknown"]),
            "reason": field("string", "A machine-readable, CamelCase reason for the last transition."),
            "message": field("string", "A human-readable message about the last transition."),
            "lastUpdateTime": field("string", "The last time the condition was updated.", format="date-time"),
            "lastTransitionTime": field(
                "string", "The last time the condition changed from one status to another.", format="date-time"),
        },
        required=["type", "status"],
    )


def replica_status_schema(conv: Converter) -> Schema:
    """ReplicaStatus."""
    return obj(
        "ReplicaStatus counts the pods of one replica type.",
        {
            "active": field("integer", "Number of running pods.", format="int32"),
            "succeeded": field("integer", "Number of pods that succeeded.", format="int32"),
            "failed": field("integer", "Number of pods that failed.", format="int32"),
            "labelSelector": conv.ref(LABEL_SELECTOR, "Deprecated: use selector. Not set by the controller."),
            "selector": field("string", "Label selector of the pods, in string form. Not set by the controller."),
        },
    )


PRINTER_COLUMNS: list[Schema] = [
    {"description": "Type of the most recent condition", "jsonPath": ".status.conditions[-1:].type",
     "name": "State", "type": "string"},
    {"description": "Number of worker pods", "jsonPath": ".spec.mpiReplicaSpecs.Worker.replicas",
     "name": "Workers", "type": "integer"},
    {"description": "Ready workers out of the requested (kubectl describe shows why in the WorkersReady condition)",
     "jsonPath": ".status.readyWorkers", "name": "Ready", "type": "string"},
    {"description": "Restarts by the failurePolicy (kubeflow.org/v2)", "jsonPath": ".status.restartCount",
     "name": "Restarts", "type": "integer"},
    {"description": "MPI implementation", "jsonPath": ".spec.mpiImplementation", "name": "Implementation",
     "priority": 1, "type": "string"},
    {"description": "MPI slots per worker", "jsonPath": ".spec.slotsPerWorker", "name": "Slots",
     "priority": 1, "type": "integer"},
    {"description": "Why workers are not ready (the WorkersReady condition's reason)",
     "jsonPath": '.status.conditions[?(@.type=="WorkersReady")].reason', "name": "Workers-Reason", "priority": 1,
     "type": "string"},
    {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
]
