"""Names of the objects and hosts derived from an MPIJob, exactly as upstream names them."""

from shared.api import constants as c


def service_name(job_name: str) -> str:
    """The headless Service is named after the MPIJob itself."""
    return job_name


def config_map_name(job_name: str) -> str:
    return job_name + c.CONFIG_SUFFIX


def ssh_secret_name(job_name: str) -> str:
    return job_name + c.SSH_AUTH_SECRET_SUFFIX


def launcher_name(job_name: str) -> str:
    """Name of the launcher batch/v1 Job, also the launcher pod's hostname."""
    return job_name + c.LAUNCHER_SUFFIX


def worker_name(job_name: str, index: int) -> str:
    return f"{job_name}{c.WORKER_SUFFIX}-{index}"


def pod_group_name(job_name: str) -> str:
    return job_name


def host_fqdn(pod_hostname: str, job_name: str, namespace: str, cluster_domain: str = "") -> str:
    """The DNS name of a launcher or worker pod through the job's headless Service."""
    host = f"{pod_hostname}.{service_name(job_name)}.{namespace}.svc"
    return f"{host}.{cluster_domain}" if cluster_domain else host


def job_selector(job_name: str) -> dict[str, str]:
    """Labels shared by every pod of a job: the Service selector."""
    return {c.LABEL_OPERATOR_NAME: c.OPERATOR_NAME, c.LABEL_JOB_NAME: job_name}


def role_selector(job_name: str, role: str) -> dict[str, str]:
    return {**job_selector(job_name), c.LABEL_JOB_ROLE: role}
