"""Field errors rendered exactly like k8s.io/apimachinery's ``field.Error`` and the API server's 422 Status.

Spec problems are data, never exceptions: validation returns a list of ``FieldError``; the webhook
turns it into a denial, the reconciler into a Warning event.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

from shared.api import constants as c


class ErrorType(StrEnum):
    """The apimachinery ``field.ErrorType`` values (the Status cause reasons)."""

    NOT_FOUND = "FieldValueNotFound"
    REQUIRED = "FieldValueRequired"
    DUPLICATE = "FieldValueDuplicate"
    INVALID = "FieldValueInvalid"
    NOT_SUPPORTED = "FieldValueNotSupported"
    FORBIDDEN = "FieldValueForbidden"
    TOO_LONG = "FieldValueTooLong"
    TOO_MANY = "FieldValueTooMany"
    INTERNAL = "InternalError"
    TYPE_INVALID = "FieldValueTypeInvalid"

    @property
    def text(self) -> str:
        return _TYPE_TEXT[self]


_TYPE_TEXT = {
    ErrorType.NOT_FOUND: "Not found",
    ErrorType.REQUIRED: "Required value",
    ErrorType.DUPLICATE: "Duplicate value",
    ErrorType.INVALID: "Invalid value",
    ErrorType.NOT_SUPPORTED: "Unsupported value",
    ErrorType.FORBIDDEN: "Forbidden",
    ErrorType.TOO_LONG: "Too long",
    ErrorType.TOO_MANY: "Too many",
    ErrorType.INTERNAL: "Internal error",
    ErrorType.TYPE_INVALID: "Invalid value",
}
_VALUELESS = {ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.TOO_LONG, ErrorType.INTERNAL}


class _Omitted:
    """apimachinery's ``field.OmitValueType``: a bad value the message leaves out."""

    def __repr__(self) -> str:
        return "OMITTED"


OMITTED: Any = _Omitted()
"""The bad value of an error whose message shows no value (``Invalid value: <detail>``)."""


@dataclass(frozen=True)
class FieldError:
    """One problem at one field path, e.g. ``spec.mpiReplicaSpecs[Launcher].replicas``."""

    type: ErrorType
    field: str
    bad_value: Any = None
    detail: str = ""
    origin: str = ""

    def body(self) -> str:
        """The message without the field path (apimachinery ``ErrorBody``)."""
        valueless = self.type in _VALUELESS or self.bad_value is OMITTED
        text = self.type.text if valueless else f"{self.type.text}: {render_value(self.bad_value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"

    def cause(self) -> dict[str, str]:
        """A ``metav1.StatusCause``."""
        return {"reason": str(self.type), "message": self.body(), "field": self.field}


def render_value(value: Any) -> str:
    """Render a bad value as Go's ``%v``/``%q`` would: strings quoted, numbers and booleans bare."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    try:
        if isinstance(value, int | float):
            return str(value)
        return orjson.dumps(value).decode()
    except (TypeError, ValueError):  # nested deeper than orjson goes, or an int too large to print
        return f"<{type(value).__name__} too deeply nested or too large to show>"


def required(field: str, detail: str) -> FieldError:
    return FieldError(ErrorType.REQUIRED, field, None, detail)


def invalid(field: str, value: Any, detail: str, origin: str = "") -> FieldError:
    return FieldError(ErrorType.INVALID, field, value, detail, origin)


def not_supported(field: str, value: Any, supported: Iterable[str]) -> FieldError:
    values = ", ".join(f'"{v}"' for v in supported)
    return FieldError(ErrorType.NOT_SUPPORTED, field, value, f"supported values: {values}" if values else "")


def forbidden(field: str, detail: str) -> FieldError:
    return FieldError(ErrorType.FORBIDDEN, field, None, detail)


MAX_REPORTED = 100
"""Errors listed in one Status or event; an object with more gets the first ones and a count of the rest."""


def capped(errors: Sequence[FieldError], limit: int = MAX_REPORTED, total: int | None = None) -> list[FieldError]:
    """The first ``limit`` errors, then one ``Too many`` error at the next one's field counting those left out
    (of ``total``, by default ``len(errors)``), so that a small body with a huge number of problems cannot
    make a huge answer."""
    total = len(errors) if total is None else total
    if total <= limit or len(errors) <= limit:
        return list(errors)
    rest = total - limit
    detail = f"more errors not shown (the first {limit} are)"
    summary = FieldError(ErrorType.TOO_MANY, errors[limit].field, rest, detail)
    return [*errors[:limit], summary]


def aggregate(errors: Sequence[FieldError]) -> str:
    """apimachinery's aggregate message: one error alone, several as ``[e1, e2]`` without duplicates."""
    messages = list(dict.fromkeys(str(e) for e in errors))
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


def invalid_status(name: str, errors: Sequence[FieldError]) -> dict[str, Any]:
    """The 422 ``metav1.Status`` the API server returns for an invalid object (``NewInvalid``)."""
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "message": f'{c.KIND}.{c.GROUP} "{name}" is invalid: {aggregate(errors)}',
        "reason": "Invalid",
        "details": {
            "name": name,
            "group": c.GROUP,
            "kind": c.KIND,
            "causes": [e.cause() for e in errors],
        },
        "code": 422,
    }
