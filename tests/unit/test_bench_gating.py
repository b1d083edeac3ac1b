"""hack/bench/gating.py's figures: each job's spans from the times it saw (watch arrivals and the API's 1 s
timestamps), their percentiles, the reconciler's histogram over the run; what the watches' objects give; and the
published figures (docs/benchmarks.md, docs/kueue.md) are those of the committed results file."""

from __future__ import annotations

from typing import Any

import pytest

from hack.bench import doc as benchdoc
from hack.bench import gating
from hack.bench.gating import JobTimes, Seen, figures, gated_pi, metric_delta, metric_values, percentile, spans

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def times(name: str, resumed: bool, last_ready: float, launcher: float, *, restarts: int = 0, pods: int = 1,
          released: float | None = None, published: float | None = None) -> JobTimes:
    """A job started at T0 whose workers were Ready at T0 + 5 and T0 + ``last_ready`` and whose launcher pod came at
    T0 + ``launcher`` (the API's timestamps: the same, truncated to the second)."""
    def stamp(offset: float) -> str:
        return f"2027-01-15T08:00:{int(offset):02d}Z"

    return JobTimes(name=name, resumed=resumed, start_seen=T0, ready_seen=[T0 + 5.0, T0 + last_ready],
                    released_seen=None if released is None else T0 + released,
                    published_seen=None if published is None else T0 + published, launcher_seen=T0 + launcher,
                    start_at=stamp(0), ready_at=[stamp(5), stamp(last_ready)], launcher_at=stamp(launcher),
                    launcher_pods=pods, restarts=restarts, outcome="Succeeded")


def test_one_jobs_spans_come_from_its_last_worker_and_its_first_launcher_pod() -> None:
    job = times("a", True, last_ready=7.25, launcher=7.5, released=7.375, published=7.3125)
    assert spans(job) == {"added": 0.25, "added_api": 0.0, "release": 0.125, "published": 0.0625, "to_launcher": 7.5,
                          "to_launcher_api": 7.0}
    across = times("b", False, last_ready=7.75, launcher=8.25)  # the API's timestamps straddle a second
    assert spans(across) == {"added": 0.5, "added_api": 1.0, "to_launcher": 8.25, "to_launcher_api": 8.0}


@pytest.mark.parametrize(("values", "p", "expected"), [
    ([3.0], 50, 3.0),
    ([3.0], 99, 3.0),
    ([4.0, 1.0, 3.0, 2.0], 50, 2.5),
    ([4.0, 1.0, 3.0, 2.0], 0, 1.0),
    ([4.0, 1.0, 3.0, 2.0], 100, 4.0),
    ([float(v) for v in range(1, 21)], 50, 10.5),
    ([float(v) for v in range(1, 21)], 99, 19.81),  # rank 18.81: between the two largest of 20
], ids=["one-p50", "one-p99", "even-median", "p0-min", "p100-max", "twenty-p50", "twenty-p99"])
def test_percentiles_are_linear_between_the_closest_ranks(values: list[float], p: float, expected: float) -> None:
    assert percentile(values, p) == pytest.approx(expected)


def test_no_values_have_no_percentile() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_the_runs_figures_over_every_job_and_by_how_it_started() -> None:
    jobs = [times("r1", True, 6.0, 6.5, released=6.25, published=6.125),
            times("r2", True, 8.0, 9.0, released=8.5, published=8.25),
            times("c1", False, 7.0, 7.25, restarts=1), times("c2", False, 9.0, 9.5, pods=2)]
    found = figures(jobs)
    assert found["resumed"] == {
        "added": {"p50": 0.75, "p99": pytest.approx(0.995), "min": 0.5, "max": 1.0, "n": 2},
        "added_api": {"p50": 0.5, "p99": pytest.approx(0.99), "min": 0.0, "max": 1.0, "n": 2},
        "release": {"p50": 0.375, "p99": pytest.approx(0.4975), "min": 0.25, "max": 0.5, "n": 2},
        "published": {"p50": 0.1875, "p99": pytest.approx(0.24875), "min": 0.125, "max": 0.25, "n": 2},
        "to_launcher": {"p50": 7.75, "p99": pytest.approx(8.975), "min": 6.5, "max": 9.0, "n": 2},
        "to_launcher_api": {"p50": 7.5, "p99": pytest.approx(8.97), "min": 6.0, "max": 9.0, "n": 2},
    }
    assert found["created"]["added"] == {"p50": 0.375, "p99": pytest.approx(0.4975), "min": 0.25, "max": 0.5, "n": 2}
    assert sorted(found["created"]) == ["added", "added_api", "to_launcher", "to_launcher_api"]  # none seen released
    assert found["all"]["added"] == {"p50": 0.5, "p99": pytest.approx(0.985), "min": 0.25, "max": 1.0, "n": 4}
    assert found["all"]["release"]["n"] == 2
    assert (found["restarts"], found["extra_launcher_pods"], found["outcomes"]) == (1, 1, {"Succeeded": 4})


def test_the_reconcilers_histogram_over_the_run() -> None:
    text = ("# HELP mpi_operator_launcher_gated_seconds Time a launcher Job was held\n"
            "mpi_operator_launcher_gated_seconds_bucket{le=\"1.0\"} 3.0\n"
            "mpi_operator_launcher_gated_seconds_count 23.0\nmpi_operator_launcher_gated_seconds_sum 150.0\n"
            "mpi_operator_launcher_gated_seconds_created 1.8e+09\n")
    after = metric_values(text)
    assert after == {"count": 23.0, "sum": 150.0}
    assert metric_delta({"count": 3.0, "sum": 30.0}, after) == {"count": 20.0, "sum": 120.0, "mean": 6.0}
    assert metric_delta({}, {}) == {"count": 0.0, "sum": 0.0, "mean": None}


def pod(name: str, role: str, *, ready_at: str | None = None, created: str = "2027-01-15T08:00:01Z",
        restarts: int = 0) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": ready_at}] if ready_at else []
    return {"metadata": {"name": name, "creationTimestamp": created, "labels": {
        "training.kubeflow.org/job-name": "j", "training.kubeflow.org/job-role": role}},
        "status": {"conditions": conditions, "containerStatuses": [{"restartCount": restarts}]}}


def test_what_the_watches_saw_of_a_resumed_job() -> None:
    seen = Seen()
    seen.pod(pod("j-worker-0", "worker"), T0 + 1)
    seen.pod(pod("j-worker-0", "worker", ready_at="2027-01-15T08:00:04Z"), T0 + 4.5)
    seen.pod(pod("j-worker-0", "worker", ready_at="2027-01-15T08:00:04Z"), T0 + 9)  # a later event: no change
    seen.pod(pod("j-worker-1", "worker", ready_at="2027-01-15T08:00:05Z"), T0 + 5.25)
    seen.job({"metadata": {"name": "j-launcher"}, "spec": {"suspend": True}}, T0 + 0.5)
    seen.job({"metadata": {"name": "j-launcher"}, "spec": {"suspend": False}}, T0 + 5.5)
    hostnames = [{"hostname": f"j-worker-{i}", "targetRef": {"kind": "Pod", "name": f"j-worker-{i}"},
                  "conditions": {"ready": True}} for i in (0, 1)]
    not_ready = {**hostnames[1], "conditions": {"ready": False}}
    seen.endpoint_slice({"metadata": {"name": "j-x"}, "endpoints": [hostnames[0], not_ready]}, T0 + 5.0)
    seen.endpoint_slice({"metadata": {"name": "j-x"}, "endpoints": hostnames}, T0 + 5.375)
    seen.endpoint_slice({"metadata": {"name": "j-x"}, "endpoints": hostnames}, T0 + 7)
    seen.pod(pod("j-launcher-abcde", "launcher", created="2027-01-15T08:00:05Z"), T0 + 5.75)
    seen.pod(pod("j-launcher-abcde", "launcher", created="2027-01-15T08:00:05Z", restarts=1), T0 + 20)
    seen.pod(pod("j-launcher-abcde", "launcher", created="2027-01-15T08:00:05Z"), T0 + 21)  # restarts never go back
    seen.mpijob({"metadata": {"name": "j", "creationTimestamp": "2027-01-15T07:59:59Z"}, "status": {"conditions": [
        {"type": "Suspended", "status": "False", "lastTransitionTime": "2027-01-15T08:00:00Z"},
        {"type": "Succeeded", "status": "True", "lastTransitionTime": "2027-01-15T08:00:30Z"}]}}, T0 + 30)
    assert seen.times("j", True, T0 + 0.25) == JobTimes(
        name="j", resumed=True, start_seen=T0 + 0.25, ready_seen=[T0 + 4.5, T0 + 5.25], released_seen=T0 + 5.5,
        published_seen=T0 + 5.375,
        launcher_seen=T0 + 5.75, start_at="2027-01-15T08:00:00Z",
        ready_at=["2027-01-15T08:00:04Z", "2027-01-15T08:00:05Z"], launcher_at="2027-01-15T08:00:05Z",
        launcher_pods=1, restarts=1, outcome="Succeeded")


def test_the_benchmarks_job_is_the_pi_example_waiting_for_ready_workers() -> None:
    job = gated_pi("g00", suspended=True)
    spec = job["spec"]
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert (job["metadata"], spec["launcherCreationPolicy"], spec["runPolicy"]) == (
        {"name": "g00"}, "WaitForWorkersReady", {"cleanPodPolicy": "Running", "suspend": True})
    assert spec["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    assert worker["readinessProbe"] == {"tcpSocket": {"port": 2222}, "initialDelaySeconds": 1, "periodSeconds": 2}
    assert worker["command"] == ["/usr/sbin/sshd"]


def test_the_published_figures_are_those_of_the_committed_run() -> None:
    results = benchdoc.load("gating")
    assert results["command"].startswith("python -m hack.bench.gating")
    page = gating.KUEUE_DOC.read_text(encoding="utf-8").splitlines()
    assert [line for line in page if line in gating.kueue_rows(results)] == gating.kueue_rows(results)
    assert "\n".join(benchdoc.gating_lines(results)).rstrip("\n") in benchdoc.rendered()
