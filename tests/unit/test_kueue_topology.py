"""Kueue's topology refusals (shared/api/kueue_topology.py): the cases of Kueue v0.19.2's
``TestValidateCreate`` in ``pkg/controller/jobs/mpijob/mpijob_webhook_test.go`` with its expected errors, then the
rules of ``jobframework/tas_validation.go`` one by one; tests/integration/test_kueue_topology.py compares the same
jobs with the real Kueue webhook's answers."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api import admission_warnings, validate
from shared.api.field_errors import aggregate
from shared.api.kueue_topology import kueue_topology_errors, kueue_topology_warnings
from tests.unit.reconciler.helpers import make_job, replica

L = "spec.mpiReplicaSpecs[Launcher].template.metadata.annotations"
W = "spec.mpiReplicaSpecs[Worker].template.metadata.annotations"
K = "kueue.x-k8s.io/"
REQ, PREF, UNC = K + "podset-required-topology", K + "podset-preferred-topology", K + "podset-unconstrained-topology"
SLICE, SIZE, GROUP = K + "podset-slice-required-topology", K + "podset-slice-size", K + "podset-group-name"
LAYERS = K + "podset-slice-required-topology-constraints"
MORE_THAN_ONE = f'must not contain more than one topology annotation: ["{REQ}", "{PREF}", "{UNC}"]'
LABEL_KEY = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
             "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


def job(launcher: dict[str, str] | None = None, worker: dict[str, str] | None = None, *, workers: int = 3,
        launchers: int = 1, launcher_as_worker: bool = False) -> Any:
    def spec(annotations: dict[str, str] | None, count: int) -> dict[str, Any]:
        out = replica(replicas=count)
        if annotations:
            out["template"]["metadata"] = {"annotations": annotations}
        return out

    return make_job("job", "default", runLauncherAsWorker=launcher_as_worker,
                    mpiReplicaSpecs={"Launcher": spec(launcher, launchers), "Worker": spec(worker, workers)})


def group(level_key: str, launcher_level: str, worker_level: str, launcher_group: str = "groupname",
          worker_group: str = "groupname") -> tuple[dict[str, str], dict[str, str]]:
    return ({GROUP: launcher_group, level_key: launcher_level}, {GROUP: worker_group, level_key: worker_level})


def inconsistent(name: str) -> list[str]:
    template = (f"must specify '{REQ}' or '{PREF}' topology consistent with '{{}}' in group '{name}'")
    return [f"{L}: Invalid value: {template.format(W)}", f"{W}: Invalid value: {template.format(L)}"]


KUEUE_CASES = [  # Kueue's TestValidateCreate, TAS cases, expected errors as Kueue states them
    pytest.param({REQ: "cloud.com/block"}, {REQ: "cloud.com/block"}, 1, [], id="valid TAS request"),
    pytest.param({REQ: "cloud.com/block", PREF: "cloud.com/block"}, {REQ: "cloud.com/block", PREF: "cloud.com/block"},
                 1, [f"{L}: Invalid value: {MORE_THAN_ONE}", f"{W}: Invalid value: {MORE_THAN_ONE}"],
                 id="invalid TAS request - more than one annotation"),
    pytest.param({REQ: "cloud.com/block", SLICE: "cloud.com/block", SIZE: "20"},
                 {REQ: "cloud.com/block", SLICE: "cloud.com/block", SIZE: "20"}, 1,
                 [f'{L}[{SIZE}]: Invalid value: "20": must not be greater than pod set count 1',
                  f'{W}[{SIZE}]: Invalid value: "20": must not be greater than pod set count 3'],
                 id="invalid slice topology request - slice size larger than number of podsets"),
    pytest.param(*group(REQ, "cloud.com/block", "cloud.com/block"), 1, [], id="valid PodSet grouping request"),
    pytest.param(*group(REQ, "cloud.com/block", "cloud.com/block", "groupname1", "groupname2"), 1,
                 [f'{L}[{GROUP}]: Invalid value: "groupname1": can only define groups of exactly 2 pod sets, got: '
                  "1 pod set(s)",
                  f'{W}[{GROUP}]: Invalid value: "groupname2": can only define groups of exactly 2 pod sets, got: '
                  "1 pod set(s)"],
                 id="invalid PodSet grouping request - groups of size other than 2"),
    pytest.param(*group(REQ, "cloud.com/block", "cloud.com/block"), 2,
                 [f'{side}[{GROUP}]: Invalid value: "groupname": can only define groups where at least one pod set '
                  "has only 1 replica, got: 2 replica(s) and 3 replica(s) in the group" for side in (L, W)],
                 id="invalid PodSet grouping request - no leader in group"),
    pytest.param(*group(REQ, "cloud.com/block", "cloud.com/rack"), 1, inconsistent("groupname"),
                 id="invalid PodSet grouping request - required topology does not match"),
    pytest.param(*group(PREF, "cloud.com/block", "cloud.com/rack"), 1, inconsistent("groupname"),
                 id="invalid PodSet grouping request - preferred topology does not match"),
    pytest.param({GROUP: "groupname", REQ: "cloud.com/block"}, {GROUP: "groupname", PREF: "cloud.com/rack"}, 1,
                 inconsistent("groupname"),
                 id="invalid PodSet grouping request - different topology annotations within group"),
]


@pytest.mark.parametrize(("launcher", "worker", "launchers", "expected"), KUEUE_CASES)
def test_kueue_webhook_cases(launcher: dict[str, str], worker: dict[str, str], launchers: int,
                             expected: list[str]) -> None:
    mpijob = job(launcher, worker, launchers=launchers)
    assert [str(error) for error in kueue_topology_errors(mpijob)] == expected


RULES = [  # ValidateTASPodSetRequest and friends, one rule at a time, on the Worker template
    pytest.param({REQ: "rack/"}, [f'{W}[{REQ}]: Invalid value: "rack/": name part must be non-empty',
                                  f'{W}[{REQ}]: Invalid value: "rack/": name part {LABEL_KEY}'],
                 id="level not a label key"),
    pytest.param({PREF: "a/b/c"}, [f'{W}[{PREF}]: Invalid value: "a/b/c": a valid label key {LABEL_KEY} with an '
                                   "optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"],
                 id="preferred level with two slashes"),
    pytest.param({UNC: "maybe"}, [f'{W}[{UNC}]: Invalid value: "maybe": must be a boolean value'],
                 id="unconstrained not a boolean"),
    pytest.param({UNC: "True"}, [], id="unconstrained as Go parses booleans"),
    pytest.param({REQ: "rack", SLICE: "host"}, [f"{W}[{SIZE}]: Required value: must be set when '{SLICE}' is "
                                                "specified"], id="slice topology without its size"),
    pytest.param({REQ: "rack", SIZE: "2"}, [f"{W}[{SIZE}]: Forbidden: may not be set when '{SLICE}' is not "
                                            "specified"], id="slice size without its topology"),
    pytest.param({REQ: "rack", SLICE: "host", SIZE: "two"},
                 [f'{W}[{SIZE}]: Invalid value: "two": must be a numeric value'] * 2, id="slice size not a number"),
    pytest.param({REQ: "rack", SLICE: "host", SIZE: "0"},
                 [f'{W}[{SIZE}]: Invalid value: "0": must be greater than or equal to 1'], id="slice size zero"),
    pytest.param({REQ: "rack", SLICE: "host", SIZE: "3"}, [], id="slice size equal to the pod count"),
    pytest.param({GROUP: "42", REQ: "rack"},
                 [f'{W}[{GROUP}]: Invalid value: "42": must not be a number',
                  f'{W}[{GROUP}]: Invalid value: "42": can only define groups of exactly 2 pod sets, got: 1 '
                  "pod set(s)"],
                 id="group name a number"),
    pytest.param({GROUP: "g"}, [f"{W}[{GROUP}]: Forbidden: may not be set when neither '{PREF}' nor '{REQ}' is "
                                "specified"], id="group without a topology"),
    pytest.param({GROUP: "g", PREF: "rack", SLICE: "host", SIZE: "1"},
                 [f"{W}[{GROUP}]: Forbidden: may not be set when '{SIZE}' is specified",
                  f"{W}[{GROUP}]: Forbidden: may not be set when '{SLICE}' is specified",
                  f'{W}[{GROUP}]: Invalid value: "g": can only define groups of exactly 2 pod sets, got: 1 pod set(s)'],
                 id="group with slices"),
    pytest.param({REQ: "block", LAYERS: '[{"topology": "rack", "size": 3}]'}, [], id="one layer"),
    pytest.param({REQ: "block", LAYERS: '[{"topology": "rack", "size": 4}, {"topology": "host", "size": 3}]'},
                 [f'{W}[{LAYERS}]: Invalid value: 4: must not be greater than pod set count 3',
                  f"{W}[{LAYERS}][1].size: Invalid value: 3: must evenly divide the parent layer size 4"],
                 id="layers too large and not dividing"),
    pytest.param({REQ: "block", LAYERS: '[{"topology": "rack", "size": 1}, {"topology": "rack", "size": 0}]'},
                 [f"{W}[{LAYERS}][1].size: Invalid value: 0: must be greater than or equal to 1",
                  f'{W}[{LAYERS}][1].topology: Duplicate value: "rack (also at index 0)"'],
                 id="layers with a duplicate and a zero size"),
    pytest.param({REQ: "block", LAYERS: "[]"},
                 [f'{W}[{LAYERS}]: Invalid value: "[]": topology constraints must contain between 1 and 3 entries'],
                 id="no layer"),
    pytest.param({REQ: "block", LAYERS: "{}"},
                 [f'{W}[{LAYERS}]: Invalid value: "{{}}": must be a valid JSON array of {{"topology": string, '
                  '"size": int32} objects'], id="layers not an array"),
    pytest.param({REQ: "block", SLICE: "rack", SIZE: "1", GROUP: "g", LAYERS: '[{"topology": "rack", "size": 1}]'},
                 [f"{W}[{GROUP}]: Forbidden: may not be set when '{SIZE}' is specified",
                  f"{W}[{GROUP}]: Forbidden: may not be set when '{SLICE}' is specified",
                  f"{W}[{GROUP}]: Forbidden: may not be set when '{LAYERS}' is specified",
                  f'{W}[{GROUP}]: Invalid value: "g": can only define groups of exactly 2 pod sets, got: 1 pod set(s)',
                  f"{W}[{LAYERS}]: Forbidden: may not be set when '{SLICE}' is specified",
                  f"{W}[{LAYERS}]: Forbidden: may not be set when '{SIZE}' is specified"],
                 id="layers with the two-level annotations and a group"),
]


@pytest.mark.parametrize(("worker", "expected"), RULES)
def test_each_rule(worker: dict[str, str], expected: list[str]) -> None:
    assert [str(error) for error in kueue_topology_errors(job(None, worker))] == expected


def test_the_webhook_refuses_them_after_upstreams_rules() -> None:
    """validate() (the webhook's and the reconciler's) ends with Kueue's errors; kubectl shows Kueue's reason."""
    mpijob = job({REQ: "rack"}, {REQ: "rack", PREF: "rack"})
    assert [str(error) for error in validate(mpijob)] == [f"{W}: Invalid value: {MORE_THAN_ONE}"]
    assert aggregate(validate(mpijob)) == f"{W}: Invalid value: {MORE_THAN_ONE}"


def test_jobs_without_kueue_annotations_have_none() -> None:
    plain = job(None, {"example.com/other": "x", K + "workload": "w", K + "pod-index-offset": "1"})
    assert kueue_topology_errors(plain) == []
    assert kueue_topology_warnings(plain) == []


GROUP_WARNING = (f"{W}[{GROUP}]: a PodSet group of the launcher and the workers without runLauncherAsWorker: Kueue "
                 "ranks worker i as i-1 and, finding rank -1, places the workers without their ranks; set "
                 "runLauncherAsWorker: true or drop the group")


@pytest.mark.parametrize(("launcher_as_worker", "annotations", "expected"), [
    pytest.param(False, group(REQ, "rack", "rack"), [GROUP_WARNING], id="group without runLauncherAsWorker"),
    pytest.param(True, group(REQ, "rack", "rack"), [], id="group with runLauncherAsWorker"),
    pytest.param(False, ({REQ: "rack"}, {REQ: "rack"}), [], id="no group"),
    pytest.param(False, ({GROUP: "g"}, {GROUP: "g"}), [], id="group without a topology (refused instead)"),
])
def test_group_without_launcher_as_worker_warns(launcher_as_worker: bool,
                                                annotations: tuple[dict[str, str], dict[str, str]],
                                                expected: list[str]) -> None:
    mpijob = job(*annotations, launcher_as_worker=launcher_as_worker)
    assert kueue_topology_warnings(mpijob) == expected
    assert [w for w in admission_warnings(mpijob) if GROUP in w] == expected


def test_huge_and_deep_values_are_errors_not_crashes() -> None:
    """Numbers past Python's int-parsing limit and JSON nested past its parser's depth, as a hostile job may hold."""
    worker = {REQ: "rack", GROUP: "9" * 5000, SLICE: "host", SIZE: "0" * 5000 + "12", LAYERS: "[" * 100_000}
    assert [str(error)[:80] for error in kueue_topology_errors(job(None, worker))] == [
        f"{W}[{GROUP}]: Forbidden: may not be set when '{SIZE}' is specified"[:80],
        f"{W}[{GROUP}]: Forbidden: may not be set when '{SLICE}' is specified"[:80],
        f"{W}[{GROUP}]: Forbidden: may not be set when '{LAYERS}' is specified"[:80],
        f'{W}[{GROUP}]: Invalid value: "{"9" * 5000}"'[:80],
        f"{W}[{LAYERS}]: Forbidden: may not be set when '{SLICE}' is specified"[:80],
        f"{W}[{LAYERS}]: Forbidden: may not be set when '{SIZE}' is specified"[:80],
        f'{W}[{LAYERS}]: Invalid value: "{"[" * 100_000}"'[:80],
        f'{W}[{SIZE}]: Invalid value: "{"0" * 5000}12"'[:80]]
