"""What a contributor reads is true: `make help` names every target of the Makefile, and the docs cite only files
that exist in this repository (no reference folder that only some machines have)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TARGET = re.compile(r"^([a-z][a-z0-9-]*):", re.MULTILINE)
# a backticked path into one of the repository's folders; the whole backticked text is taken
CITED = re.compile(r"`((?:tests|hack|deploy|docs|reconciler|webhook|shared|examples|spec|requirements)/[^`\s]*)`")
# each doc a reader of this repository reads; CHANGELOG.md is history and may name what was since renamed
DOCS = sorted({ROOT / "README.md", ROOT / "CONTRIBUTING.md", *ROOT.glob("docs/**/*.md"), *ROOT.glob("deploy/**/*.md"),
               *ROOT.glob("examples/**/*.md")})


def test_make_help_names_every_target() -> None:
    targets = set(TARGET.findall((ROOT / "Makefile").read_text()))
    shown = subprocess.run(["make", "--no-print-directory", "help"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout
    named = set(re.findall(r"^\s*make ([a-z][a-z0-9-]*)", shown, re.MULTILINE))
    assert sorted(targets - named) == []
    assert sorted(named - targets) == []


def _cited(doc: Path) -> list[tuple[int, str]]:
    cited = []
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        for match in CITED.finditer(line):
            path = match.group(1).split("::")[0].split("#")[0].rstrip(".,:;)")
            upstream = "upstream" in line[max(0, match.start() - 12):match.start()]
            if not upstream and not any(ch in path for ch in "*<>{}$[]"):
                cited.append((number, path))
    return cited


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_docs_cite_only_files_that_exist(doc: Path) -> None:
    missing = [f"{doc.relative_to(ROOT)}:{n}: {path}" for n, path in _cited(doc) if not (ROOT / path).exists()]
    assert missing == []


def test_the_citation_check_sees_a_missing_file(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("see `spec/controller.md` and `tests/unit/test_contributing.py::test_x`, "
                   "upstream's `examples/v2beta1/pi/`, `examples/pi-*.yaml`\n")
    assert _cited(doc) == [(1, "spec/controller.md"), (1, "tests/unit/test_contributing.py")]
