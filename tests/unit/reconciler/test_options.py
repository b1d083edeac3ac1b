"""The reconciler's command line: upstream's flag names and defaults, clear errors for bad settings."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler.__main__ import main
from reconciler.mpijob.builders import GangScheduling
from reconciler.options import Options, OptionsError, parse_options
from reconciler.settings import Settings


@pytest.mark.parametrize(("argv", "limits"), [
    pytest.param([], (0.0, 0), id="none by default"),
    pytest.param(["--kube-api-qps=5", "--kube-api-burst=10"], (5.0, 10), id="upstream's, given"),
    pytest.param(["-kube-api-qps=50"], (50.0, 10), id="qps given: upstream's burst"),
    pytest.param(["--kube-api-burst=100"], (5.0, 100), id="burst given: upstream's qps"),
])
def test_client_limits(argv: list[str], limits: tuple[float, int]) -> None:
    options = parse_options(argv)
    assert (options.kube_api_qps, options.kube_api_burst) == limits


def test_upstream_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBEFLOW_NAMESPACE", raising=False)
    assert parse_options([]) == Options(
        master="", kubeconfig="", namespace="", threadiness=16, version=False, monitoring_port=0, health_port=8080,
        gang_scheduling="", lock_namespace="mpi-operator", leader_elect=True, kube_api_qps=0.0, kube_api_burst=0,
        queue_rate_limit=10.0, queue_burst=100, cluster_domain="", max_concurrent_writes=64, child_event_delay=0.2,
        progress_write_interval=1.0,
        log_level="info", log_format="logfmt")


@pytest.mark.parametrize(("argv", "settings"), [
    pytest.param([], Settings("", None, 64), id="defaults"),
    pytest.param(["--cluster-domain=cluster.local", "--gang-scheduling=volcano", "--max-concurrent-writes=3"],
                 Settings("cluster.local", GangScheduling("volcano"), 3), id="given"),
    pytest.param(["--default-worker-backend=IndexedJob"], Settings("", None, 64, "IndexedJob"),
                 id="indexed-job-workers"),
])
def test_the_settings_of_a_sync_are_made_from_the_options(argv: list[str], settings: Settings) -> None:
    assert Settings.from_options(parse_options(argv)) == settings


def test_go_style_flags_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBEFLOW_NAMESPACE", "team-a")
    monkeypatch.setenv("KUBECONFIG", "/from/env")
    options = parse_options(["-kubeConfig", "/from/flag", "-alsologtostderr", "--threadiness=4",
                             "-cluster-domain=cluster.local", "--leader-elect=false", "-v=2"])
    assert (options.kubeconfig, options.namespace, options.threadiness, options.cluster_domain,
            options.leader_elect) == ("/from/env", "team-a", 4, "cluster.local", False)


@pytest.mark.parametrize(("argv", "message"), [
    (["--threadiness=0"], "--threadiness must be at least 1, got 0"),
    (["--monitoring-port=70000"], "--monitoring-port must be a port from 0 to 65535, got 70000"),
    (["--kube-api-qps=0"], "--kube-api-qps must be positive and --kube-api-burst at least 1"),
    (["--kube-api-burst=0"], "--kube-api-qps must be positive and --kube-api-burst at least 1"),
    (["--cluster-domain=.local"], "--cluster-domain must be a DNS domain like cluster.local, got '.local'"),
])
def test_invalid_settings_are_refused(argv: list[str], message: str) -> None:
    with pytest.raises(OptionsError, match=message.replace(".", r"\.").replace("(", r"\(")):
        parse_options(argv)


def test_an_unknown_worker_backend_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_options(["--default-worker-backend=StatefulSet"])
    assert ("argument --default-worker-backend/-default-worker-backend: invalid choice: 'StatefulSet' "
            "(choose from 'Pods', 'IndexedJob')" in capsys.readouterr().err)


def test_invalid_settings_exit_non_zero_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--threadiness=-1"]) == 2
    assert "python -m reconciler: error: --threadiness must be at least 1, got -1" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["API Version: v2", "Version: 0.1.0"]


# Upstream's container args, exactly as its v0.8.2 manifests pass them: deploy/v2beta1/mpi-operator.yaml and
# manifests/overlays/standalone (lock in mpi-operator), manifests/overlays/kubeflow (lock in kubeflow).
UPSTREAM_ARGS = {
    "standalone": (["-alsologtostderr", "--lock-namespace=mpi-operator"], "mpi-operator"),
    "kubeflow": (["-alsologtostderr", "--lock-namespace=kubeflow"], "kubeflow"),
    "base": (["-alsologtostderr"], "mpi-operator"),
}


@pytest.mark.parametrize("overlay", sorted(UPSTREAM_ARGS))
def test_upstream_manifest_args(overlay: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBEFLOW_NAMESPACE", raising=False)
    argv, lock_namespace = UPSTREAM_ARGS[overlay]
    assert parse_options(argv) == dataclasses.replace(parse_options([]), lock_namespace=lock_namespace)


# Every flag `mpi-operator -h` (v0.8.2) lists besides its own options (klog's), in the forms Go's flag
# package accepts: -x, --x, -x=v, -x v. Accepted and ignored: nothing of the parsed options changes.
KLOG_FLAGS = [
    ["-add_dir_header"], ["-alsologtostderr"], ["-alsologtostderr=true"], ["--alsologtostderr"],
    ["-alsologtostderrthreshold=INFO"], ["-legacy_stderr_threshold_behavior=false"], ["-log_backtrace_at", "x.go:1"],
    ["-log_dir=/tmp"], ["-log_file", "/tmp/log"], ["-log_file_max_size=1800"], ["-logtostderr=false"],
    ["-logtostderr"], ["-one_output"], ["-skip_headers"], ["-skip_log_headers"], ["-stderrthreshold=INFO"],
    ["-v=2"], ["-v", "4"], ["--v=6"], ["-vmodule=controller=4"],
]


@pytest.mark.parametrize("argv", KLOG_FLAGS, ids=" ".join)
def test_klog_flags_are_accepted_and_ignored(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBEFLOW_NAMESPACE", raising=False)
    assert parse_options([*argv, "--threadiness=3"]) == parse_options(["--threadiness=3"])


def test_every_go_option_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    """upstream's own flags (cmd/mpi-operator/app/options/options.go, v0.8.2), single-dash as Go writes them."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    options = parse_options(["-master=https://api:6443", "-kubeConfig=/k", "-namespace=ns", "-threadiness=3",
                             "-monitoring-port=8443", "-gang-scheduling=volcano", "-lock-namespace=kubeflow",
                             "-kube-api-qps=20", "-kube-api-burst=30", "-controller-queue-rate-limit=5",
                             "-controller-queue-burst=50", "-cluster-domain=cluster.local"])
    assert (options.master, options.kubeconfig, options.namespace, options.threadiness, options.monitoring_port,
            options.gang_scheduling, options.lock_namespace, options.kube_api_qps, options.kube_api_burst,
            options.queue_rate_limit, options.queue_burst, options.cluster_domain) == (
        "https://api:6443", "/k", "ns", 3, 8443, "volcano", "kubeflow", 20.0, 30, 5.0, 50, "cluster.local")
