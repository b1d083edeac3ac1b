"""Admission of the failurePolicy through both versions: updates compared with the v2 defaults, a policy annotation
that conversion cannot lift, and the total size of annotations a v2 job is stored with."""

from __future__ import annotations

import json
from typing import Any

from shared.api import constants as c
from shared.api.v2_spec_annotation import canonical_json
from tests.webhook.conftest import Client, review
from tests.webhook.test_admission_http import UID, minimal, post
from webhook.app import VALIDATE_PATH

ANNOTATION = c.V2_SPEC_ANNOTATION
RULE = {"name": "disrupted", "action": "RestartJob", "onPodConditions": [{"type": "DisruptionTarget"}]}
POLICY = {"maxRestarts": 2, "rules": [RULE]}
DEFAULTED = {"maxRestarts": 2, "rules": [{**RULE, "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}
V2: dict[str, Any] = {"kind": {"group": "kubeflow.org", "version": "v2", "kind": "MPIJob"},
      "resource": {"group": "kubeflow.org", "version": "v2", "resource": "mpijobs"}}


def v2_job(policy: dict[str, Any], annotations: dict[str, str] | None = None,
           labels: dict[str, str] | None = None) -> dict[str, Any]:
    job = minimal()
    job["apiVersion"] = c.API_VERSION_V2
    job["metadata"].update({k: v for k, v in (("annotations", annotations), ("labels", labels)) if v})
    job["spec"]["runPolicy"] = {"failurePolicy": policy}
    return job


async def test_a_v2_label_of_a_policy_stored_without_its_defaults_is_allowed(client: Client) -> None:
    """The old object is the stored one converted (no status), the new one has the schema's default."""
    old, new = v2_job(POLICY), v2_job(DEFAULTED, labels={"team": "a"})
    status, body = await post(client, VALIDATE_PATH, review(new, "UPDATE", old, **V2))
    assert (status, body["response"]) == (200, {"uid": UID, "allowed": True})
    changed = v2_job({**DEFAULTED, "maxRestarts": 3})
    status, body = await post(client, VALIDATE_PATH, review(changed, "UPDATE", old, **V2))
    assert status == 200
    assert [cause["field"] for cause in body["response"]["status"]["details"]["causes"]] == [
        "spec.runPolicy.failurePolicy"]


async def test_a_policy_annotation_conversion_cannot_lift_is_allowed_with_a_warning(client: Client) -> None:
    """Not canonical (the mutating webhook did not run): the reconciler runs the job with it, but v2 clients see an
    annotation, so the user is told."""
    job = minimal()
    job["metadata"]["annotations"] = {ANNOTATION: json.dumps({"spec": {"runPolicy": {"failurePolicy": POLICY}}})}
    job["spec"]["runPolicy"] = {}
    status, body = await post(client, VALIDATE_PATH, review(job))
    assert (status, body["response"]) == (200, {"uid": UID, "allowed": True, "warnings": [
        f"metadata.annotations[{ANNOTATION}]: is not canonical JSON (keys sorted, no spaces), so kubeflow.org/v2 "
        "clients see this annotation instead of spec.runPolicy.failurePolicy; the job runs with the policy it "
        "holds"]})
    job["metadata"]["annotations"] = {ANNOTATION: canonical_json({"spec": {"runPolicy": {"failurePolicy": POLICY}}})}
    status, body = await post(client, VALIDATE_PATH, review(job))
    assert (status, body["response"]) == (200, {"uid": UID, "allowed": True})


def _at_total(size: int) -> dict[str, Any]:
    """A v2 job whose annotations, stored with the one conversion adds for its failurePolicy, total ``size`` bytes
    (keys and values, UTF-8, as the API server counts them)."""
    stored = canonical_json({"spec": {"runPolicy": {"failurePolicy": DEFAULTED}}})
    key = "example.com/notes"
    padding = size - len(ANNOTATION) - len(stored) - len(key)
    return v2_job(DEFAULTED, annotations={key: "é" * (padding // 2) + "x" * (padding % 2)})


async def test_the_annotations_a_v2_job_is_stored_with_are_at_most_256_kib(client: Client) -> None:
    status, body = await post(client, VALIDATE_PATH, review(_at_total(262144), **V2))
    assert (status, body["response"]) == (200, {"uid": UID, "allowed": True})
    status, body = await post(client, VALIDATE_PATH, review(_at_total(262145), **V2))
    assert status == 200
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["message"] == (
        'MPIJob.kubeflow.org "pi" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes')
    assert body["response"]["status"]["details"]["causes"] == [{
        "reason": "FieldValueTooLong", "message": "Too long: may not be more than 262144 bytes",
        "field": "metadata.annotations"}]
