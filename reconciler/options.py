"""Command-line options, with upstream's flag names and defaults (Go style: ``-x`` and ``--x`` both work)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from shared.api.worker_backend import WORKER_BACKEND_PODS, WORKER_BACKENDS
from shared.cli import duration

# The klog flags the Go binary registers (v0.8.2: klog.InitFlags in cmd/mpi-operator/app/options), which
# upstream's manifests pass (-alsologtostderr) and users add (-v=2): accepted and ignored, so upstream's
# Deployment args work unchanged; our logs are configured by --log-level and --log-format.
_KLOG_BOOL = ("alsologtostderr", "logtostderr", "skip_headers", "skip_log_headers", "add_dir_header", "one_output",
              "legacy_stderr_threshold_behavior")
_KLOG_VALUE = ("v", "vmodule", "log_dir", "log_file", "log_file_max_size", "stderrthreshold", "log_backtrace_at",
               "alsologtostderrthreshold")


@dataclass(frozen=True)
class Options:
    master: str
    kubeconfig: str
    namespace: str
    threadiness: int
    version: bool
    monitoring_port: int
    health_port: int
    gang_scheduling: str
    lock_namespace: str
    leader_elect: bool
    kube_api_qps: float  # 0: no client-side limit
    kube_api_burst: int
    queue_rate_limit: float
    queue_burst: int
    cluster_domain: str
    max_concurrent_writes: int
    child_event_delay: float
    progress_write_interval: float
    log_level: str
    log_format: str
    default_worker_backend: str = "Pods"  # for jobs whose worker-backend annotation says nothing
    # the webhook's managed certificates (reconciler/certs), off by default as upstream has none
    manage_webhook_certificates: bool = False
    webhook_cert_duration: timedelta = timedelta(days=365)
    webhook_cert_renew_before: timedelta = timedelta(days=30)
    webhook_ca_duration: timedelta = timedelta(days=3650)
    webhook_ca_renew_before: timedelta = timedelta(days=90)
    webhook_cert_extra_dns_names: tuple[str, ...] = ()


UPSTREAM_QPS, UPSTREAM_BURST = 5.0, 10  # upstream's client limits, in force when either flag is given
# Upstream runs 2 sync goroutines. A sync mostly waits on the API server, and two at a time cap a stream of
# small jobs near 10 jobs/s here (each first sync makes ~8 writes); 16 concurrent syncs cost a few KiB each.
DEFAULT_THREADINESS = 16


class OptionsError(ValueError):
    """A setting that cannot work, with a message for the user."""


def _flag(parser: argparse.ArgumentParser, name: str, **kwargs: object) -> None:
    parser.add_argument(f"--{name}", f"-{name}", **kwargs)  # type: ignore[arg-type]


def _bool(text: str) -> bool:
    if text.lower() in ("1", "t", "true", "yes"):
        return True
    if text.lower() in ("0", "f", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m reconciler", description="The MPIJob reconciler.",
                                     allow_abbrev=False)
    _flag(parser, "master", default="", help="API server address; overrides the kubeconfig")
    _flag(parser, "kubeConfig", dest="kubeconfig", default="",
          help="kubeconfig path, or several separated by ':', merged as kubectl merges them (env KUBECONFIG "
               "overrides it)")
    _flag(parser, "namespace", default=os.environ.get("KUBEFLOW_NAMESPACE", ""),
          help="namespace to watch (default: env KUBEFLOW_NAMESPACE; empty: all namespaces)")
    _flag(parser, "threadiness", type=int, default=DEFAULT_THREADINESS,
          help=f"jobs synced at once, never one job twice (default {DEFAULT_THREADINESS}; upstream's is 2)")
    _flag(parser, "version", action="store_true", help="print the version and exit")
    _flag(parser, "monitoring-port", dest="monitoring_port", type=int, default=0, help="/metrics port (0: off)")
    _flag(parser, "health-port", dest="health_port", type=int, default=8080, help="/healthz port (0: off)")
    _flag(parser, "gang-scheduling", dest="gang_scheduling", default="",
          help="'volcano', 'kube-scheduler' (native gangs, Kubernetes 1.36 with the GenericWorkload gate), "
               "or a scheduler-plugins scheduler name (empty: no gang scheduling)")
    _flag(parser, "lock-namespace", dest="lock_namespace", default="mpi-operator", help="namespace of the Lease")
    _flag(parser, "leader-elect", dest="leader_elect", type=_bool, default=True, nargs="?", const=True,
          help="hold the mpi-operator Lease before reconciling (default true)")
    _flag(parser, "kube-api-qps", dest="kube_api_qps", type=float, default=None,
          help="client-side QPS limit (default: none, the API server's Priority and Fairness pushes back with "
               "429s; when this or --kube-api-burst is set, the other takes upstream's default: 5 QPS, 10 burst)")
    _flag(parser, "kube-api-burst", dest="kube_api_burst", type=int, default=None,
          help="client-side burst (default: none; see --kube-api-qps)")
    _flag(parser, "controller-queue-rate-limit", dest="queue_rate_limit", type=float, default=10.0,
          help="work queue retry rate (default 10)")
    _flag(parser, "controller-queue-burst", dest="queue_burst", type=int, default=100, help="work queue burst")
    _flag(parser, "cluster-domain", dest="cluster_domain", default="",
          help="the cluster's DNS domain: hostfile entries and the workers' DNS search path (cluster.local if empty)")
    _flag(parser, "max-concurrent-writes", dest="max_concurrent_writes", type=int, default=64,
          help="worker creates and deletes in flight at once, for all jobs together (default 64)")
    _flag(parser, "child-event-delay", dest="child_event_delay", type=float, default=0.2,
          help="seconds a job's sync waits after an event of one of its children, so that a burst of pod "
               "events costs one sync and one status write; a job of more than 1,000 workers waits "
               "proportionally longer (2 s at 10,000 workers with 0.2), at most 5 s (default 0.2)")
    _flag(parser, "progress-write-interval", dest="progress_write_interval", type=float, default=1.0,
          help="least seconds between a job's writes that only report progress (worker counts, Running workers "
               "in discover_hosts.sh); condition changes are written at once (default 1; 0: every change)")
    _flag(parser, "default-worker-backend", dest="default_worker_backend", default=WORKER_BACKEND_PODS,
          choices=list(WORKER_BACKENDS),
          help="how the workers of a job that does not say (annotation mpijobs.kubeflow.org/worker-backend, v2 "
               "spec.workerBackend) run: 'Pods', created one by one by the reconciler (upstream's), or "
               "'IndexedJob', one Indexed batch/v1 Job <job>-worker; a job keeps the backend its workers were made "
               "with (default Pods)")
    _certificate_flags(parser)
    _flag(parser, "log-level", dest="log_level", default="info", choices=["debug", "info", "warning", "error"])
    _flag(parser, "log-format", dest="log_format", default="logfmt", choices=["logfmt", "json"])
    for name in _KLOG_BOOL:
        _flag(parser, name, type=_bool, nargs="?", const=True, default=None, help=argparse.SUPPRESS)
    for name in _KLOG_VALUE:
        _flag(parser, name, default=None, help=argparse.SUPPRESS)
    return parser


def _certificate_flags(parser: argparse.ArgumentParser) -> None:
    _flag(parser, "manage-webhook-certificates", dest="manage_webhook_certificates", type=_bool, default=False,
          nargs="?", const=True,
          help="make and renew the webhook's serving certificate and CA in the Secret mpijob-webhook-tls and keep the "
               "caBundle of both webhook configurations and of the CRD's conversion webhook current, while leading "
               "(default false: cert-manager or you provide them; deploy/certs/builtin turns it on)")
    _flag(parser, "webhook-cert-duration", dest="webhook_cert_duration", type=duration, default="8760h",
          help="validity of a serving certificate (default 8760h, a year)")
    _flag(parser, "webhook-cert-renew-before", dest="webhook_cert_renew_before", type=duration,
          default="720h", help="renew a serving certificate this long before it expires (default 720h)")
    _flag(parser, "webhook-ca-duration", dest="webhook_ca_duration", type=duration, default="87600h",
          help="validity of the CA (default 87600h, 10 years)")
    _flag(parser, "webhook-ca-renew-before", dest="webhook_ca_renew_before", type=duration,
          default="2160h",
          help="make the next CA this long before the CA expires; the old one stays trusted until it expires "
               "(default 2160h)")
    _flag(parser, "webhook-cert-extra-dns-names", dest="webhook_cert_extra_dns_names", default="",
          help="comma-separated DNS names the serving certificate holds besides the Service's")


def parse_options(argv: Sequence[str] | None = None) -> Options:
    args = build_parser().parse_args(argv)
    kubeconfig = os.environ.get("KUBECONFIG") or args.kubeconfig
    options = Options(
        master=args.master, kubeconfig=kubeconfig, namespace=args.namespace, threadiness=args.threadiness,
        version=args.version, monitoring_port=args.monitoring_port, health_port=args.health_port,
        gang_scheduling=args.gang_scheduling, lock_namespace=args.lock_namespace, leader_elect=args.leader_elect,
        kube_api_qps=_limit(args.kube_api_qps, args.kube_api_burst, UPSTREAM_QPS),
        kube_api_burst=int(_limit(args.kube_api_burst, args.kube_api_qps, UPSTREAM_BURST)),
        queue_rate_limit=args.queue_rate_limit,
        queue_burst=args.queue_burst, cluster_domain=args.cluster_domain,
        max_concurrent_writes=args.max_concurrent_writes, child_event_delay=args.child_event_delay,
        progress_write_interval=args.progress_write_interval,
        log_level=args.log_level, log_format=args.log_format, default_worker_backend=args.default_worker_backend,
        manage_webhook_certificates=args.manage_webhook_certificates,
        webhook_cert_duration=args.webhook_cert_duration, webhook_cert_renew_before=args.webhook_cert_renew_before,
        webhook_ca_duration=args.webhook_ca_duration, webhook_ca_renew_before=args.webhook_ca_renew_before,
        webhook_cert_extra_dns_names=tuple(n.strip() for n in args.webhook_cert_extra_dns_names.split(",")
                                           if n.strip()),
    )
    check(options)
    return options


def _limit(value: float | None, other: float | None, upstream: float) -> float:
    """A client limit: 0 (none) when neither limit flag is set; else the flag's value or upstream's default."""
    if value is None and other is None:
        return 0.0
    if value is None:
        return upstream
    return value if value > 0 else -1.0  # an explicit 0 or less is refused by check()


def check(options: Options) -> None:
    problems = []
    if options.threadiness < 1:
        problems.append(f"--threadiness must be at least 1, got {options.threadiness}")
    for name, port in (("--monitoring-port", options.monitoring_port), ("--health-port", options.health_port)):
        if not 0 <= port <= 65535:
            problems.append(f"{name} must be a port from 0 to 65535, got {port}")
    if options.kube_api_qps < 0 or options.kube_api_burst < 0 or (
            options.kube_api_qps > 0 and options.kube_api_burst < 1):
        problems.append("--kube-api-qps must be positive and --kube-api-burst at least 1")
    if options.queue_rate_limit <= 0 or options.queue_burst < 1:
        problems.append("--controller-queue-rate-limit must be positive and --controller-queue-burst at least 1")
    if not 0 <= options.child_event_delay <= 10:
        problems.append(f"--child-event-delay must be from 0 to 10 seconds, got {options.child_event_delay}")
    if not 0 <= options.progress_write_interval <= 60:
        interval = options.progress_write_interval
        problems.append(f"--progress-write-interval must be from 0 to 60 seconds, got {interval}")
    if options.max_concurrent_writes < 1:
        problems.append("--max-concurrent-writes must be at least 1")
    if options.cluster_domain.startswith(".") or " " in options.cluster_domain:
        problems.append(f"--cluster-domain must be a DNS domain like cluster.local, got {options.cluster_domain!r}")
    if options.manage_webhook_certificates:
        from reconciler.certs.policy import certificate_policy  # noqa: PLC0415  (cryptography, only when used)

        problems += certificate_policy(options).problems()
    if problems:
        raise OptionsError("; ".join(problems))
