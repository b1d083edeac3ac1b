"""Pure conversion of ``apiextensions.k8s.io/v1`` ConversionReview dicts (``POST /convert``): no I/O.

The answer echoes ``request.uid`` and returns every object in request order as ``desiredAPIVersion``, with
metadata unchanged but for the ``mpijobs.kubeflow.org/v2-spec`` annotation (shared/api/conversion.py). One
object that cannot be converted fails the whole review with ``result.status: Failed`` and a message naming
it; a body that is not a ConversionReview is a ``BadReviewError`` (HTTP 400).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from shared.api import shown
from shared.api.conversion import ConversionError, convert
from shared.jsondict import JSONDict
from webhook.admission import BadReviewError

REVIEW_API_VERSION: Final = "apiextensions.k8s.io/v1"
REVIEW_KIND: Final = "ConversionReview"


def parse_conversion_review(body: bytes) -> JSONDict:
    """The ``request`` of a ConversionReview body; ``BadReviewError`` says what is wrong with anything else."""
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise BadReviewError(f"request body is not valid JSON (error at line {error.lineno} column "
                             f"{error.colno})") from None
    if not isinstance(review, dict):
        raise BadReviewError("request body must be a JSON object (a ConversionReview)")
    if review.get("apiVersion") != REVIEW_API_VERSION or review.get("kind") != REVIEW_KIND:
        got = f"apiVersion {shown.identifier(review.get('apiVersion'))} kind {shown.identifier(review.get('kind'))}"
        raise BadReviewError(f"expected apiVersion {REVIEW_API_VERSION} kind {REVIEW_KIND}, got {got}")
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadReviewError("ConversionReview.request must be an object")
    if not isinstance(request.get("uid"), str) or not request["uid"]:
        raise BadReviewError("ConversionReview.request.uid must be a non-empty string")
    if not isinstance(request.get("desiredAPIVersion"), str):
        raise BadReviewError("ConversionReview.request.desiredAPIVersion must be a string")
    if not isinstance(request.get("objects"), list):
        raise BadReviewError("ConversionReview.request.objects must be an array")
    return request


def bad_review(message: str) -> JSONDict:
    """The body of a 400 answer: a ConversionReview with a Failed result and no uid to echo."""
    return {"apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND,
            "response": {"uid": "", "result": {"status": "Failed", "message": message}}}


def convert_review(request: JSONDict) -> tuple[JSONDict, int]:
    """The ConversionReview answering ``request``, and the index of the object that failed (-1 if none)."""
    desired = request["desiredAPIVersion"]
    converted: list[Any] = []
    for index, obj in enumerate(request["objects"]):
        try:
            converted.append(convert(obj, desired))
        except ConversionError as error:
            return _answer(request["uid"], failed=f"objects[{index}]: {error}"), index
    response = {"uid": request["uid"], "convertedObjects": converted, "result": {"status": "Success"}}
    return {"apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND, "response": response}, -1


def failed_review(uid: str, message: str) -> JSONDict:
    """A ConversionReview reporting a failure of the whole request."""
    return _answer(uid, failed=message)


def _answer(uid: str, *, failed: str) -> JSONDict:
    return {"apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND,
            "response": {"uid": uid, "result": {"status": "Failed", "message": failed}}}
