"""Our examples and upstream's: valid ones pass validation after defaulting, invalid ones fail as documented."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shared.api import MPIJob, validate
from tests.reference import example_params, load_example
from tests.unit.helpers import wire, with_defaults

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("path", [*sorted(EXAMPLES.glob("pi-*.yaml")), EXAMPLES / "netcheck" / "netcheck.yaml",
                                  EXAMPLES / "horovod-pytorch.yaml", EXAMPLES / "deepspeed.yaml"],
                         ids=lambda p: p.name)
def test_our_valid_examples(path: Path) -> None:
    job = MPIJob.model_validate(yaml.safe_load(path.read_text()))
    assert validate(with_defaults(job)) == []


def test_our_invalid_example_fails_as_its_comment_says() -> None:
    path = EXAMPLES / "invalid-launcher-replicas.yaml"
    documented = [line[4:] for line in path.read_text().splitlines() if line.startswith("#   ")]
    job = MPIJob.model_validate(yaml.safe_load(path.read_text()))
    assert [str(e) for e in validate(with_defaults(job))] == documented


@pytest.mark.parametrize("path", example_params())
def test_upstream_examples_are_valid(path: Path) -> None:
    job = MPIJob.model_validate(load_example(path))
    assert validate(with_defaults(job)) == []
    assert wire(job) == load_example(path), "a round trip through the model loses nothing"
