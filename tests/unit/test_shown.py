"""How a client's value appears in a message or a log line (shared/api/shown.py), and the one way into a decoded
JSON object (shared/jsondict.py)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api import shown
from shared.jsondict import object_at


@pytest.mark.parametrize(("value", "expected"), [
    ("kubeflow.org/v2", "'kubeflow.org/v2'"),
    ("MPIJob", "'MPIJob'"),
    (None, "None"),
    ("", "a string of 0 characters"),
    ("a" * 64, "a string of 64 characters"),  # one over an identifier's 63
    ("kubeflow.org/v2 token", "a string of 21 characters"),
    ({"a": 1}, "an object"),
    ([1], "an array"),
    (True, "a boolean"),
    (2, "a number"),
    (2.5, "a number"),
])
def test_an_identifier_is_quoted_and_anything_else_described(value: object, expected: str) -> None:
    assert shown.identifier(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("x" * 80, "x" * 80),
    ("x" * 81, "<81 characters>"),
    (7, 7),
    (False, False),
    (None, None),
    ({"a": 1}, "<dict>"),
    ([1], "<list>"),
])
def test_a_field_value_is_shown_unless_long_or_composite(value: object, expected: object) -> None:
    assert shown.field_value(value) == expected


@pytest.mark.parametrize(("obj", "expected"), [
    ({"spec": {"runPolicy": {"suspend": True}}}, {"suspend": True}),
    ({"spec": {"runPolicy": {}}}, {}),
    ({"spec": {"runPolicy": None}}, None),
    ({"spec": {"runPolicy": "x"}}, None),
    ({"spec": ["runPolicy"]}, None),
    ({"spec": None}, None),
    ({}, None),
    ("spec", None),
])
def test_object_at_is_the_object_there_or_none(obj: Any, expected: object) -> None:
    assert object_at(obj, "spec", "runPolicy") == expected
