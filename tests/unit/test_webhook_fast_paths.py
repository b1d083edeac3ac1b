"""The webhook's fast paths give exactly what the plain paths give: the nesting check on the review's text,
and the admission answers computed with it."""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from hack.payloads import admission_review, mpijob_of_size
from shared.api import MPIJob, json_nesting_within, rules
from shared.api.parse import MAX_NESTING
from tests.fuzz.strategies import reviews
from webhook import admission

PIECES = ["a", "{", "}", "[", "]", '"', "\\", "\u00e9", " ", "\n", "()", '\\"', "\\u005b"]


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
    """A value ``depth`` levels deep, mixing objects and arrays, with arbitrary siblings on the way."""
    value = random_value(rng, 99)
    for _ in range(depth):
        value = [value, random_value(rng, 10)] if rng.random() < 0.5 else {random_text(rng): value, "s": "]"}
    return value


def encodings(value: Any) -> list[bytes]:
    """The ways a client may write ``value``: compact, indented, ASCII with escapes."""
    return [orjson.dumps(value), orjson.dumps(value, option=orjson.OPT_INDENT_2),
            json.dumps(value, ensure_ascii=True).encode()]


@pytest.mark.parametrize("seed", range(40))
def test_json_nesting_within_agrees_with_the_recursive_depth(seed: int) -> None:
    rng = random.Random(seed)
    values = [random_value(rng) for _ in range(20)] + [nested(rng, rng.randint(95, 105)) for _ in range(5)]
    for value in values:
        depth = levels(value)
        for text in encodings(value):
            for limit in (depth - 1, depth, depth + 1, MAX_NESTING):
                assert json_nesting_within(text, limit) == (depth <= limit), (text[:200], limit)


@pytest.mark.parametrize(("text", "limit", "within"), [
    (b"1", 0, True),
    (b"[]", 0, False),
    (b"[]", 1, True),
    (b'{"a":"[[[[","b":["}"]}', 2, True),
    (b'{"a":"[[[[","b":["}"]}', 1, False),
    (b'["\\"[", {"x": "\\\\"}]', 2, True),
    (b'["\\"[", {"x": "\\\\"}]', 1, False),
    (b"[" * 101 + b"]" * 101, 100, False),
    (b"[" * 100 + b"]" * 100, 100, True),
], ids=["scalar", "empty array, 0", "empty array, 1", "brackets in strings", "brackets in strings, too deep",
        "escaped quotes and backslashes", "escaped, too deep", "101 levels", "100 levels"])
def test_json_nesting_within_cases(text: bytes, limit: int, within: bool) -> None:
    assert json_nesting_within(text, limit) is within


def deep_review(depth: int, where: str, operation: str = "CREATE") -> dict[str, Any]:
    """A review of the benchmark's MPIJob with a value ``depth`` levels deep in one place."""
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


def answers(review: dict[str, Any]) -> tuple[admission.Admission, admission.Admission]:
    body = orjson.dumps(review)
    request = admission.parse_review(body)
    return admission.validate_request(request), admission.validate_request(request, body)


@pytest.mark.parametrize(("where", "operation"), [("object", "CREATE"), ("userInfo", "CREATE"), ("object", "UPDATE"),
                                                  ("oldObject", "UPDATE")])
@pytest.mark.parametrize("depth", [90, 96, 97, 98, 99, 120])
def test_validate_with_the_body_answers_as_without_it_near_the_nesting_limit(depth: int, where: str,
                                                                              operation: str) -> None:
    plain, fast = answers(deep_review(depth, where, operation))
    assert fast == plain


def test_validate_with_the_body_answers_as_without_it_for_the_benchmark_review() -> None:
    plain, fast = answers(admission_review(mpijob_of_size("bench", 20_000)))
    assert plain.outcome == "allowed"
    assert fast == plain


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reviews())
def test_validate_with_the_body_answers_as_without_it_for_generated_reviews(review: Any) -> None:
    body = orjson.dumps(review)
    try:
        request = admission.parse_review(body)
    except admission.BadReviewError:
        return
    assert admission.validate_request(request, body) == admission.validate_request(request)


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
