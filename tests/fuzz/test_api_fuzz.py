"""Fuzz the shared API package as the reconciler and the webhook call it: parse, default, validate, warn.

Properties: nothing raises; every error carries a field path and renders; defaulting is idempotent and
the webhook's JSON Patch yields the reconciler's defaulted object.
"""

from __future__ import annotations

from typing import Any

import jsonpatch
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.api import (
    ErrorType,
    FieldError,
    admission_warnings,
    aggregate,
    defaulted_dict,
    defaults_patch,
    invalid_status,
    parse_mpijob,
    validate,
    validate_update,
)
from shared.api.field_errors import MAX_REPORTED, capped, render_value
from shared.api.parse import MAX_NESTING
from tests.fuzz.figures import BUDGETS, Counter, fuzz_settings, measured
from tests.fuzz.strategies import MPIJOBS, json_values
from tests.unit.helpers import wire, with_defaults


def assert_field_errors(errors: list[FieldError]) -> None:
    """Every error names a field and renders, alone and as the API server's 422 Status."""
    for error in errors:
        assert isinstance(error, FieldError)
        assert isinstance(error.field, str)
        assert error.field
        assert str(error).startswith(error.field + ": ")
    if errors:
        status = invalid_status("x", errors)
        orjson.dumps(status)
        assert all(cause["field"] for cause in status["details"]["causes"])
        assert aggregate(errors)


def check_job(obj: Any, old: Any, counter: Counter) -> None:
    counter.examples += 1
    defaulted = defaulted_dict(obj) if isinstance(obj, dict) else obj
    job, errors = parse_mpijob(defaulted)
    assert_field_errors(errors)
    if job is None:
        assert errors
        counter.count("type_errors")
        return
    assert defaulted_dict(defaulted) == defaulted  # idempotent
    again = with_defaults(job)
    assert with_defaults(again) == again
    assert wire(again) == wire(with_defaults(again))
    errors = validate(job)
    assert_field_errors(errors)
    counter.count("invalid" if errors else "valid")
    admission_warnings(job)
    patched = jsonpatch.apply_patch(obj, defaults_patch(obj))
    patched_job, patched_errors = parse_mpijob(defaulted_dict(patched))
    assert not patched_errors
    assert patched_job is not None
    assert validate(patched_job) == errors  # the webhook's persisted defaults and the reconciler's agree
    old_job, _ = parse_mpijob(defaulted_dict(old) if isinstance(old, dict) else old)
    if old_job is not None:
        assert_field_errors(validate_update(old_job, job))


@pytest.mark.parametrize("examples", BUDGETS)
def test_api_never_raises_and_every_error_has_a_field(examples: int) -> None:
    with measured("api: parse_mpijob/with_defaults/validate/validate_update") as counter:

        @fuzz_settings(examples)
        @given(obj=st.one_of(MPIJOBS, MPIJOBS, MPIJOBS, json_values(6)), old=st.one_of(MPIJOBS, st.none()))
        def run(obj: Any, old: Any) -> None:
            check_job(obj, old, counter)

        run()
    assert counter.examples >= examples


DEEP = 1000  # orjson's decoder allows 1024 levels: the deepest a body the webhook parses can be


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


def deep_job(where: str, deep: Any) -> dict[str, Any]:
    job: dict[str, Any] = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "pi"},
                           "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": {}}}}}
    spec = job["spec"]
    if where == "slotsPerWorker":
        spec["slotsPerWorker"] = deep
    elif where == "metadata":
        job["metadata"] = {"annotations": deep}
    elif where == "spec":
        job["spec"] = [deep]
    elif where == "runPolicy":
        spec["runPolicy"] = [deep]
    elif where == "replica":
        spec["mpiReplicaSpecs"]["Launcher"] = [deep]
    elif where == "template":
        spec["mpiReplicaSpecs"]["Launcher"]["template"] = {"spec": {"containers": [{"name": "c", "x": deep}]}}
    else:
        job["metadata"]["name"] = [deep]
    return job


PLACES = ["slotsPerWorker", "metadata", "spec", "runPolicy", "replica", "template", "name"]


@pytest.mark.parametrize("where", PLACES)
def test_deep_nesting_is_one_field_error(where: str) -> None:
    """Regression: a value nested deeper than orjson encodes (254 levels) crashed rendering its error (500),
    and one deeper than pydantic serializes (255) crashed ``with_defaults``; now anything nested more than
    MAX_NESTING levels is one Forbidden error at the path where it goes too deep."""
    job = deep_job(where, nested(DEEP))
    check_job(job, None, Counter())
    parsed, errors = parse_mpijob(defaulted_dict(job))
    assert parsed is None
    assert len(errors) == 1
    assert errors[0].type == ErrorType.FORBIDDEN
    assert errors[0].field.count(".") + errors[0].field.count("[") == MAX_NESTING - 1  # separators of 100 parts
    assert str(errors[0]).endswith(f"Forbidden: must not be nested more than {MAX_NESTING} levels deep")


def test_nesting_up_to_the_limit_is_accepted() -> None:
    depth = MAX_NESTING - 8  # under spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].x, 8 levels down
    job = deep_job("template", nested(depth))
    parsed, errors = parse_mpijob(defaulted_dict(job))
    assert parsed is not None, errors
    assert validate(with_defaults(parsed)) == []
    assert parse_mpijob(defaulted_dict(deep_job("template", nested(depth + 1))))[0] is None


def test_unprintable_bad_values_render() -> None:
    """Regression: rendering a bad value orjson cannot encode raised instead of describing it."""
    assert render_value({"a": nested(300)}) == "<dict too deeply nested or too large to show>"
    assert render_value([2**70]) == "<list too deeply nested or too large to show>"
    assert render_value(10**5000) == "<int too deeply nested or too large to show>"
    assert render_value(2**70) == str(2**70)


def test_many_replica_types_are_one_error() -> None:
    """Regression: 200k unknown replica types (an 8 MiB body) took 14 s and answered 122 MiB."""
    job = deep_job("slotsPerWorker", 1)
    job["spec"]["mpiReplicaSpecs"] = {f"w{i}": {} for i in range(200_000)}
    parsed, errors = parse_mpijob(defaulted_dict(job))
    assert parsed is None
    assert [str(e) for e in errors] == ['spec.mpiReplicaSpecs: Too many: 200000: must have at most 16 items '
                                        '(only "Launcher" and "Worker" are used)']


def test_many_type_errors_are_capped() -> None:
    """Regression: one type error per element of a long list made answers far larger than the request."""
    job = deep_job("slotsPerWorker", 1)
    job["status"] = {"conditions": ["bad"] * 50_000}
    parsed, errors = parse_mpijob(job)
    assert parsed is None
    assert len(errors) == MAX_REPORTED + 1
    assert str(errors[-1]) == ("status.conditions[100]: Too many: 49900: more errors not shown "
                               f"(the first {MAX_REPORTED} are)")
    assert capped(errors[:5]) == errors[:5]
