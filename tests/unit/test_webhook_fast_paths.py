"""The webhook's fast path gives exactly what the plain path gives: a job name whose derived names all fit
skips checking each of them."""

from __future__ import annotations

import pytest

from shared.api import MPIJob, rules


def _names_near_the_limits() -> list[tuple[str, int]]:
    """(job name, worker replicas): names at and around the lengths where a derived name stops fitting in a
    label, and names with the characters a label refuses or only a subdomain takes."""
    cases = [("", 1), ("a", 1), ("1abc", 1), ("abc-", 1), ("-abc", 1), ("a.b", 1), ("A", 1), ("a_b", 1),
             ("ab\u00e9", 1), ("a b", 1), ("a\n", 1)]
    for length in range(44, 66):
        for replicas in (1, 9, 10, 11, 1000, 100000):
            cases += [("a" * length, replicas), ("a" * (length - 2) + "-1", replicas), ("a." + "b" * length, replicas)]
    return cases


@pytest.mark.parametrize(("name", "replicas"), _names_near_the_limits())
def test_the_derived_names_fast_path_decides_as_the_checks_it_skips(name: str, replicas: int,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    job = MPIJob.model_validate({"metadata": {"name": name}, "spec": {"mpiReplicaSpecs": {
        "Worker": {"replicas": replicas}}}})
    if rules._every_derived_name_valid(job):
        assert [check(derived) for _, derived, check in rules._derived_objects(job)] == [[]] * 5
    fast = rules._derived_name_errors(job)
    monkeypatch.setattr(rules, "_every_derived_name_valid", lambda _: False)
    assert fast == rules._derived_name_errors(job)
