"""The guides cannot drift from the code: the user guide's MPIJobs pass the webhook, the operator guide
names every command-line flag (with its default) and every metric."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.render import render_job
from shared.api import constants as c
from webhook.admission import validate_request

DOCS = Path(__file__).resolve().parents[2] / "docs"
USER_GUIDE = DOCS / "user-guide.md"


def _mpijobs(path: Path) -> list[Any]:
    blocks = re.findall(r"^```yaml\n(.*?)^```", path.read_text(encoding="utf-8"), re.S | re.M)
    documents = [yaml.safe_load(block) for block in blocks]
    return [pytest.param(d, id=d["metadata"]["name"]) for d in documents
            if isinstance(d, dict) and d.get("kind") == c.KIND]


def test_the_user_guide_has_a_v2_example_with_a_failure_policy() -> None:
    v2 = [p.values[0] for p in _mpijobs(USER_GUIDE) if p.values[0]["apiVersion"] == c.API_VERSION_V2]
    assert [job["spec"]["runPolicy"]["failurePolicy"]["maxRestarts"] for job in v2] == [3]


def test_the_user_guide_has_an_example_of_each_implementation() -> None:
    implementations = {p.values[0]["spec"].get("mpiImplementation", c.OPENMPI) for p in _mpijobs(USER_GUIDE)}
    assert implementations == set(c.MPI_IMPLEMENTATIONS)


@pytest.mark.parametrize("job", _mpijobs(USER_GUIDE))
def test_user_guide_mpijobs_pass_the_webhook_without_warnings(job: dict[str, Any]) -> None:
    version = str(job.get("apiVersion", c.API_VERSION)).rpartition("/")[2]  # v2 is judged as v2 (failurePolicy)
    request = {"uid": "0", "operation": "CREATE", "object": job,
               "kind": {"group": c.GROUP, "version": version, "kind": c.KIND}}
    admission = validate_request(request)
    assert [str(e) for e in admission.errors] == []
    assert admission.response.get("warnings") is None
    assert render_job(job)  # and the reconciler's builders accept it


OPERATOR_GUIDE = DOCS / "operator-guide.md"


def _section(path: Path, heading: str) -> str:
    """The text under a ``### heading`` up to the next heading."""
    text = path.read_text(encoding="utf-8")
    start = text.index(f"\n### {heading}\n")
    end = text.find("\n#", start + 1)
    return text[start:end if end != -1 else None]


def _shown(action: argparse.Action) -> str | None:
    """How the guide writes an option's default; None when it has none to show (switches, lists)."""
    if action.required:
        return "required"
    value = action.default
    if isinstance(action, argparse._StoreTrueAction) or isinstance(value, list):
        return None
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float):
        return f"`{value:g}`"
    return '`""`' if value == "" else f"`{value}`"


def _parsers() -> dict[str, argparse.ArgumentParser]:
    from reconciler.options import build_parser  # noqa: PLC0415
    from reconciler.render import build_parser as render_parser  # noqa: PLC0415
    from webhook.__main__ import build_parser as webhook_parser  # noqa: PLC0415  (the aiohttp app: only here)
    from webhook.certs import build_parser as certs_parser  # noqa: PLC0415

    return {"Reconciler flags": build_parser(), "Webhook flags": webhook_parser(),
            "`python -m webhook.certs`": certs_parser(), "`python -m reconciler render`": render_parser()}


def test_the_operator_guide_lists_every_flag_with_its_default() -> None:
    for heading, parser in _parsers().items():
        rows = {m.group(1): m.group(2).strip() for m in
                re.finditer(r"^\| `(--[\w-]+)` \|([^|]*)\|", _section(OPERATOR_GUIDE, heading), re.M)}
        documented = [a for a in parser._actions
                      if a.option_strings and a.help != argparse.SUPPRESS and a.dest != "help"]
        flags = {next(o for o in a.option_strings if o.startswith("--")): a for a in documented}
        assert sorted(set(flags) - set(rows)) == [], f"{heading}: flags missing from docs/operator-guide.md"
        assert sorted(set(rows) - set(flags)) == [], f"{heading}: rows for flags the command does not have"
        for flag, action in flags.items():
            shown = _shown(action)
            assert shown is None or rows[flag] == shown, f"{heading} {flag}: default {shown}, the guide {rows[flag]}"


def _exported(registry: Any) -> set[str]:
    """Metric names as Prometheus sees them (counters with ``_total``)."""
    return {m.name + ("_total" if m.type == "counter" else "") for m in registry.collect()}


def test_the_operator_guide_names_every_metric() -> None:
    from datetime import UTC, datetime  # noqa: PLC0415
    from types import SimpleNamespace  # noqa: PLC0415

    from prometheus_client import CollectorRegistry  # noqa: PLC0415

    from reconciler.certs.rotator import RotationMetrics  # noqa: PLC0415
    from reconciler.mpijob.metrics import OperatorMetrics  # noqa: PLC0415
    from webhook.metrics import WebhookMetrics  # noqa: PLC0415

    reconciler = OperatorMetrics(CollectorRegistry())
    RotationMetrics(reconciler.registry)  # --manage-webhook-certificates
    reconciler.watch_jobs([])
    reconciler.watch_queue(lambda: 0)
    webhook = WebhookMetrics()
    reloader = SimpleNamespace(reload_count=1, failure_count=0, loaded=SimpleNamespace(not_after=datetime.now(UTC)))
    webhook.watch_certificate(reloader)  # type: ignore[arg-type]
    tables = {m.group(1) for m in re.finditer(r"^\| `(\w+)` \| (?:counter|gauge|histogram) \|",
                                              OPERATOR_GUIDE.read_text(encoding="utf-8"), re.M)}
    exported = _exported(reconciler.registry) | _exported(webhook.registry)
    assert sorted(exported - tables) == [], "metrics missing from docs/operator-guide.md"
    assert sorted(tables - exported) == [], "docs/operator-guide.md names metrics nobody exports"


def test_the_supported_kubernetes_versions_are_the_tested_ones() -> None:
    """The docs name the version every test tier runs (build-testbin.sh's default) and the 1.30 minimum of v2."""
    script = (DOCS.parent / "hack" / "build" / "build-testbin.sh").read_text(encoding="utf-8")
    tested = re.search(r'^K8S_VERSION="\$\{K8S_VERSION:-v(\d+\.\d+\.\d+)\}"', script, re.M)
    assert tested is not None
    assert tested.group(1) == "1.36.3"
    deploy = (DOCS / "deploy.md").read_text(encoding="utf-8")
    guide = (DOCS / "operator-guide.md").read_text(encoding="utf-8")
    assert "**1.36 is the version tested** (1.36.3:" in deploy
    assert "The manifests need **1.30 or newer**" in deploy
    assert "Requirements: Kubernetes 1.30 or newer, and tested on 1.36 only (1.36.3:" in guide
    for text in (deploy, guide, (DOCS.parent / "README.md").read_text(encoding="utf-8")):
        assert "Kubernetes 1.25 or newer" not in text
