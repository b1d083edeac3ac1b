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


def test_the_user_guide_has_an_example_of_each_implementation() -> None:
    implementations = {p.values[0]["spec"].get("mpiImplementation", c.OPENMPI) for p in _mpijobs(USER_GUIDE)}
    assert implementations == set(c.MPI_IMPLEMENTATIONS)


@pytest.mark.parametrize("job", _mpijobs(USER_GUIDE))
def test_user_guide_mpijobs_pass_the_webhook_without_warnings(job: dict[str, Any]) -> None:
    request = {"uid": "0", "operation": "CREATE", "object": job,
               "kind": {"group": c.GROUP, "version": c.VERSION, "kind": c.KIND}}
    admission = validate_request(request)
    assert [str(e) for e in admission.errors] == []
    assert admission.response.get("warnings") is None
    assert render_job(job)  # and the reconciler's builders accept it


def _flags(parser: argparse.ArgumentParser) -> list[tuple[str, Any]]:
    """(--long-flag, default) of every documented option of a parser."""
    return [(next(o for o in action.option_strings if o.startswith("--")), action.default)
            for action in parser._actions
            if action.option_strings and action.help != argparse.SUPPRESS and action.dest != "help"]
