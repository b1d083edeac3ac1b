"""The nesting limit (MAX_NESTING levels of objects and arrays) is exact: an MPIJob nested one level deeper
is refused with one Forbidden error, in parse_mpijob and in the webhook's validate, near the bound and for
values with brackets, quotes and escapes in their keys and strings."""

from __future__ import annotations

import random
from typing import Any

import pytest

from hack.bench.payloads import admission_review, mpijob_of_size
from shared.api import ErrorType, parse_mpijob
from shared.api.parse import MAX_NESTING
from webhook import admission

PIECES = ["a", "{", "}", "[", "]", '"', "\\", "\u00e9", " ", "\n", "()", '\\"', "\\u005b"]
FORBIDDEN = f"Forbidden: must not be nested more than {MAX_NESTING} levels deep"


def levels(value: Any) -> int:
    """How deep objects and arrays nest in ``value`` (a scalar: 0, ``[]``: 1), by recursion."""
    if isinstance(value, dict):
        return 1 + max((levels(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((levels(v) for v in value), default=0)
    return 0


def random_text(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 5)))


def random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 12 or roll < 0.3:
        return rng.choice([1, None, True, 2.5, random_text(rng), "plain"])
    if roll < 0.65:
        return [random_value(rng, depth + 1) for _ in range(rng.choice([0, 1, 2, 3]))]
    return {random_text(rng): random_value(rng, depth + 1) for _ in range(rng.choice([0, 1, 2, 3]))}


def nested(rng: random.Random, depth: int) -> Any:
    """A value about ``depth`` levels deep, mixing objects and arrays, with arbitrary siblings on the way."""
    value = random_value(rng, 99)
    for _ in range(depth):
        value = [value, random_value(rng, 10)] if rng.random() < 0.5 else {random_text(rng): value, "s": "]"}
    return value


@pytest.mark.parametrize("seed", range(40))
def test_parse_refuses_exactly_what_is_nested_too_deep(seed: int) -> None:
    rng = random.Random(seed)
    for value in [random_value(rng) for _ in range(5)] + [nested(rng, rng.randint(92, 102)) for _ in range(5)]:
        job = {"metadata": {"name": "pi", "annotations": {"deep": value}}}
        parsed, errors = parse_mpijob(job)
        if levels(job) <= MAX_NESTING:
            assert parsed is not None, errors
        else:
            assert parsed is None
            assert len(errors) == 1
            assert errors[0].type == ErrorType.FORBIDDEN
            assert errors[0].field.startswith("metadata.annotations.deep")
            assert str(errors[0]).endswith(FORBIDDEN)


def deep_review(depth: int, where: str, operation: str = "CREATE") -> dict[str, Any]:
    """A review of the benchmark's MPIJob with a value about ``depth`` levels deep in one place."""
    rng = random.Random(depth)
    job = mpijob_of_size("deep", 4000)
    review = admission_review(job)
    request = review["request"]
    if operation == "UPDATE":
        request.update(operation="UPDATE", oldObject=mpijob_of_size("deep", 4000))
    if where == "object":
        job["metadata"]["annotations"] = {"deep": nested(rng, depth)}
    elif where == "oldObject":
        request["oldObject"]["metadata"]["annotations"] = {"deep": nested(rng, depth)}
    else:
        request["userInfo"]["extra"] = {"deep": nested(rng, depth)}
    return review


@pytest.mark.parametrize(("where", "operation"), [("object", "CREATE"), ("userInfo", "CREATE"), ("object", "UPDATE"),
                                                  ("oldObject", "UPDATE")])
@pytest.mark.parametrize("depth", [90, 96, 97, 98, 99, 120])
def test_validate_denies_an_object_nested_too_deep(depth: int, where: str, operation: str) -> None:
    """Only the object is judged: a deep userInfo is not the MPIJob's, and a deep oldObject (stored before
    this webhook existed) does not block an update that is itself valid."""
    review = deep_review(depth, where, operation)
    answer = admission.validate_request(review["request"])
    if where == "object" and levels(review["request"]["object"]) > MAX_NESTING:
        assert answer.outcome == "denied"
        assert [e.type for e in answer.errors] == [ErrorType.FORBIDDEN]
        assert str(answer.errors[0]).endswith(FORBIDDEN)
    else:
        assert answer.outcome == "allowed", answer.errors


def test_the_benchmark_review_is_allowed() -> None:
    assert admission.validate_request(admission_review(mpijob_of_size("bench", 20_000))["request"]).outcome == "allowed"
