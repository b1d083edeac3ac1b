"""How `make test` splits the run between its workers (tests/tier_scheduling.py)."""

from __future__ import annotations

from tests.tier_scheduling import rank, scope_of


def test_the_e2e_tier_is_one_scope_and_every_other_file_its_own() -> None:
    assert {nodeid: scope_of(nodeid) for nodeid in (
        "tests/e2e/test_pi.py::test_pi[openmpi]",
        "tests/e2e/test_helm.py::test_install",
        "tests/integration/test_kueue.py::test_admitted",
        "tests/integration/test_kueue.py::test_queued[2]",
        "tests/faults/test_api_outage.py::test_outage",
        "tests/unit/reconciler/test_sync.py::test_synced",
        "tests/unit/test_render.py::test_every_example_renders_as_its_golden_file[pi-openmpi]",
    )} == {
        "tests/e2e/test_pi.py::test_pi[openmpi]": "e2e",
        "tests/e2e/test_helm.py::test_install": "e2e",
        "tests/integration/test_kueue.py::test_admitted": "tests/integration/test_kueue.py",
        "tests/integration/test_kueue.py::test_queued[2]": "tests/integration/test_kueue.py",
        "tests/faults/test_api_outage.py::test_outage": "tests/faults/test_api_outage.py",
        "tests/unit/reconciler/test_sync.py::test_synced": "tests/unit/reconciler/test_sync.py",
        "tests/unit/test_render.py::test_every_example_renders_as_its_golden_file[pi-openmpi]":
            "tests/unit/test_render.py",
    }


def test_the_longest_tiers_start_first_and_each_keeps_its_order() -> None:
    collected = ["tests/unit/test_a.py::t1", "tests/e2e/test_pi.py::t2", "tests/integration/test_k.py::t3",
                 "tests/faults/test_o.py::t4", "tests/e2e/test_helm.py::t5", "tests/webhook/test_w.py::t6",
                 "tests/integration/test_a.py::t7"]
    assert sorted(collected, key=rank) == [
        "tests/e2e/test_pi.py::t2", "tests/e2e/test_helm.py::t5", "tests/faults/test_o.py::t4",
        "tests/integration/test_k.py::t3", "tests/integration/test_a.py::t7", "tests/unit/test_a.py::t1",
        "tests/webhook/test_w.py::t6"]
