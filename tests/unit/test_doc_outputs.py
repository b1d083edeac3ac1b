"""Sample outputs in the docs cannot drift from what they show: `kubectl get mpijobs` columns are the CRD's printer
columns (default and `-o wide`), the CRD size the docs give is the file's, and an admission denial is printed as
kubectl prints the webhook's 422 (``The MPIJob "pi" is invalid: ...``, tests/integration/test_webhook_apiserver.py),
not as a 403."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _columns() -> tuple[list[str], list[str]]:
    """kubectl's headers for MPIJobs: (default, wide); NAME first, and AGE where the CRD puts it."""
    version = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]
    columns = version["additionalPrinterColumns"]
    default = ["NAME", *(c["name"].upper() for c in columns if not c.get("priority"))]
    wide = ["NAME", *(c["name"].upper() for c in columns)]
    return default, wide


def _lines(pattern: str) -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(pattern, line):
                found.append((f"{page.relative_to(ROOT)}:{number}", line))
    return found


SAMPLE_HEADERS = _lines(r"^NAME\s+STATE\s")
COMMENTED = _lines(r"kubectl get mpij.*# NAME ")


def test_the_docs_show_mpijob_columns() -> None:
    assert len(SAMPLE_HEADERS) == 3
    assert len(COMMENTED) == 2


@pytest.mark.parametrize(("where", "line"), SAMPLE_HEADERS, ids=[w for w, _ in SAMPLE_HEADERS])
def test_a_sample_header_is_the_crds_columns(where: str, line: str) -> None:
    assert line.split() in _columns(), where


@pytest.mark.parametrize(("where", "line"), COMMENTED, ids=[w for w, _ in COMMENTED])
def test_a_commented_column_list_is_the_crds(where: str, line: str) -> None:
    shown, _, wide = line.split("# ", 1)[1].partition("-o wide adds ")
    default, all_columns = _columns()
    assert re.findall(r"\b[A-Z][A-Z-]+\b", shown) == default, where
    assert re.findall(r"\b[A-Z][A-Z-]+\b", wide) == [c for c in all_columns if c not in default], where


def test_the_crd_size_the_docs_give_is_the_files() -> None:
    claims = _lines(r"(CRD|The file is)[^.]*about \d+ kB")
    assert len(claims) == 3, claims
    size_kb = CRD.stat().st_size / 1000
    for where, line in claims:
        stated = int(re.findall(r"about (\d+) kB", line)[0])
        assert abs(stated - size_kb) <= 0.05 * size_kb, (where, stated, round(size_kb))


def test_a_denial_is_shown_as_kubectl_prints_the_webhooks_422() -> None:
    assert _lines(r"Error from server \(Forbidden\).*admission webhook") == []
    shown = [where.split(":")[0] for where, _ in _lines(r'^The MPIJob "[a-z0-9-]+" is invalid: ')]
    assert shown == ["docs/validation.md"]
