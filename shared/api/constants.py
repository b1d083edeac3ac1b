"""Constants of the kubeflow.org/v2beta1 MPIJob API, byte for byte those of upstream mpi-operator v0.8.2."""

from typing import Final

GROUP: Final = "kubeflow.org"
VERSION: Final = "v2beta1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "MPIJob"
LIST_KIND: Final = "MPIJobList"
PLURAL: Final = "mpijobs"
SINGULAR: Final = "mpijob"
OPERATOR_NAME: Final = "mpi-operator"
CONTROLLER_NAME: Final = "mpi-job-controller"

# Replica types: the keys of spec.mpiReplicaSpecs and status.replicaStatuses (case-sensitive).
LAUNCHER: Final = "Launcher"
WORKER: Final = "Worker"
REPLICA_TYPES: Final = (LAUNCHER, WORKER)

# MPI implementations.
OPENMPI: Final = "OpenMPI"
INTEL: Final = "Intel"
MPICH: Final = "MPICH"
MPI_IMPLEMENTATIONS: Final = (OPENMPI, INTEL, MPICH)

# Clean pod policies.
CLEAN_POD_POLICY_ALL: Final = "All"
CLEAN_POD_POLICY_RUNNING: Final = "Running"
CLEAN_POD_POLICY_NONE: Final = "None"
CLEAN_POD_POLICIES: Final = (CLEAN_POD_POLICY_ALL, CLEAN_POD_POLICY_RUNNING, CLEAN_POD_POLICY_NONE)

# Launcher creation policies.
LAUNCHER_AT_STARTUP: Final = "AtStartup"
LAUNCHER_WAIT_FOR_WORKERS_READY: Final = "WaitForWorkersReady"
LAUNCHER_CREATION_POLICIES: Final = (LAUNCHER_AT_STARTUP, LAUNCHER_WAIT_FOR_WORKERS_READY)

# Replica restart policies (only Never and OnFailure pass validation).
RESTART_ALWAYS: Final = "Always"
RESTART_ON_FAILURE: Final = "OnFailure"
RESTART_NEVER: Final = "Never"
RESTART_EXIT_CODE: Final = "ExitCode"
VALID_RESTART_POLICIES: Final = (RESTART_NEVER, RESTART_ON_FAILURE)

# runPolicy.managedBy values.
MANAGED_BY_MPI_OPERATOR: Final = "kubeflow.org/mpi-operator"
MANAGED_BY_MULTIKUEUE: Final = "kueue.x-k8s.io/multikueue"
MANAGED_BY_VALUES: Final = (MANAGED_BY_MPI_OPERATOR, MANAGED_BY_MULTIKUEUE)

# Defaults (Go defaults and CRD defaults).
DEFAULT_SLOTS_PER_WORKER: Final = 1
DEFAULT_SSH_AUTH_MOUNT_PATH: Final = "/root/.ssh"
DEFAULT_LAUNCHER_REPLICAS: Final = 1
DEFAULT_WORKER_REPLICAS: Final = 0

# Condition types, statuses and reasons.
CONDITION_CREATED: Final = "Created"
CONDITION_RUNNING: Final = "Running"
CONDITION_RESTARTING: Final = "Restarting"
CONDITION_SUCCEEDED: Final = "Succeeded"
CONDITION_SUSPENDED: Final = "Suspended"
CONDITION_FAILED: Final = "Failed"
CONDITION_TRUE: Final = "True"
CONDITION_FALSE: Final = "False"
CONDITION_UNKNOWN: Final = "Unknown"
REASON_CREATED: Final = "MPIJobCreated"
REASON_RUNNING: Final = "MPIJobRunning"
REASON_SUCCEEDED: Final = "MPIJobSucceeded"
REASON_SUSPENDED: Final = "MPIJobSuspended"
REASON_RESUMED: Final = "MPIJobResumed"
REASON_FAILED: Final = "MPIJobFailed"
REASON_EVICTED: Final = "MPIJobEvicted"
REASON_VALIDATION_ERROR: Final = "ValidationError"
REASON_RESOURCE_EXISTS: Final = "ErrResourceExists"
REASON_SET_POD_TEMPLATE_RESTART_POLICY: Final = "SetPodTemplateRestartPolicy"

# The WorkersReady condition (ours, not upstream's): whether every worker is Ready and, if not, why.
# It is kept first in status.conditions, so that upstream's conditions stay last (the State column).
CONDITION_WORKERS_READY: Final = "WorkersReady"
REASON_WORKERS_READY: Final = "WorkersReady"
REASON_UNSCHEDULABLE: Final = "Unschedulable"
REASON_SCHEDULING_GATED: Final = "SchedulingGated"
REASON_CREATE_FAILED: Final = "CreateFailed"
REASON_WORKER_FAILED: Final = "WorkerFailed"
REASON_CONTAINER_CREATING: Final = "ContainerCreating"
REASON_POD_INITIALIZING: Final = "PodInitializing"
REASON_WORKERS_STARTING: Final = "WorkersStarting"
REASON_WORKERS_RECOVERING: Final = "WorkersRecovering"  # starting again after an error or after being ready
REASON_FINISHED: Final = "MPIJobFinished"

# Labels.
LABEL_OPERATOR_NAME: Final = "training.kubeflow.org/operator-name"
LABEL_JOB_NAME: Final = "training.kubeflow.org/job-name"
LABEL_JOB_ROLE: Final = "training.kubeflow.org/job-role"
LABEL_REPLICA_INDEX: Final = "training.kubeflow.org/replica-index"
LABEL_REPLICA_TYPE: Final = "training.kubeflow.org/replica-type"
ROLE_LAUNCHER: Final = "launcher"
ROLE_WORKER: Final = "worker"

# Child object name suffixes.
LAUNCHER_SUFFIX: Final = "-launcher"
WORKER_SUFFIX: Final = "-worker"
CONFIG_SUFFIX: Final = "-config"
SSH_AUTH_SECRET_SUFFIX: Final = "-ssh"

# Volumes, files and paths.
CONFIG_VOLUME_NAME: Final = "mpi-job-config"
CONFIG_MOUNT_PATH: Final = "/etc/mpi"
HOSTFILE_NAME: Final = "hostfile"
DISCOVER_HOSTS_SCRIPT_NAME: Final = "discover_hosts.sh"
SSH_AUTH_VOLUME: Final = "ssh-auth"
SSH_PRIVATE_KEY: Final = "ssh-privatekey"
SSH_PUBLIC_KEY: Final = "ssh-publickey"
SSH_PRIVATE_KEY_FILE: Final = "id_rsa"
SSH_PUBLIC_KEY_FILE: Final = "id_rsa.pub"
SSH_AUTHORIZED_KEYS_FILE: Final = "authorized_keys"
ROOT_SSH_PATH: Final = "/root/.ssh"
DEFAULT_WORKER_COMMAND: Final = ("/usr/sbin/sshd", "-De")

# Environment variables.
ENV_JOB_ROLE: Final = "K_MPI_JOB_ROLE"
ENV_KUBEFLOW_NAMESPACE: Final = "KUBEFLOW_NAMESPACE"
ENV_NVIDIA_VISIBLE_DEVICES: Final = "NVIDIA_VISIBLE_DEVICES"
ENV_NVIDIA_DRIVER_CAPABILITIES: Final = "NVIDIA_DRIVER_CAPABILITIES"

# Gang scheduling.
VOLCANO_GROUP_NAME_ANNOTATION: Final = "scheduling.k8s.io/group-name"
VOLCANO_QUEUE_ANNOTATION: Final = "scheduling.volcano.sh/queue-name"
SCHEDULER_PLUGINS_POD_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"

# kubeflow.org/v2 (docs/proposals/v2.md): served beside v2beta1, which stays the storage version.
VERSION_V2: Final = "v2"
API_VERSION_V2: Final = f"{GROUP}/{VERSION_V2}"
API_VERSIONS: Final = (API_VERSION, API_VERSION_V2)
# The v2-only spec fields of an object stored as v2beta1, as canonical JSON at their v2 paths.
V2_SPEC_ANNOTATION: Final = "mpijobs.kubeflow.org/v2-spec"

# spec.runPolicy.failurePolicy (v2).
ACTION_RESTART_JOB: Final = "RestartJob"
ACTION_FAIL_JOB: Final = "FailJob"
FAILURE_POLICY_ACTIONS: Final = (ACTION_RESTART_JOB, ACTION_FAIL_JOB)
EXIT_CODES_IN: Final = "In"
EXIT_CODES_NOT_IN: Final = "NotIn"
EXIT_CODES_OPERATORS: Final = (EXIT_CODES_IN, EXIT_CODES_NOT_IN)
CONDITION_STATUSES: Final = (CONDITION_TRUE, CONDITION_FALSE, CONDITION_UNKNOWN)
# The failurePolicy at run time: the attempt label of a job's pods and launcher Job, and the reasons.
RESTART_ATTEMPT_LABEL: Final = "mpijobs.kubeflow.org/restart-attempt"
POD_DISRUPTION_TARGET: Final = "DisruptionTarget"
REASON_RESTART_JOB: Final = "RestartJobFailurePolicyAction"
REASON_FAIL_JOB: Final = "FailJobFailurePolicyAction"
REASON_REACHED_MAX_RESTARTS: Final = "ReachedMaxRestarts"
REASON_RESTARTING: Final = "MPIJobRestarting"  # WorkersReady while a restart recreates the workers
