#!/usr/bin/env python3
"""Generate docs/api-reference.md from the pydantic models of shared/api (see hack/gen/apiref).

Types and field names come from the models, defaults from shared/api's defaulting table, accepted values
and the rejection messages from the webhook's admission function, descriptions and formats from the CRD.
Refuses to write when the models and the CRD disagree.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

if __package__ in (None, ""):  # run as `python hack/gen/api_reference.py`: make `hack.gen.apiref` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hack.gen.apiref.markdown import render, render_v2
from hack.gen.apiref.probes import collect
from hack.gen.apiref.shapes import Schema, mismatches, type_docs
from shared.api.types import MPIJob, MPIJobSpec
from shared.api.v2types import MPIJobV2

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = REPO_ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
V2_PATCH_FILE = REPO_ROOT / "deploy" / "components" / "api-v2" / "crd-patch.yaml"  # adds the opt-in v2 version
DEFAULT_OUTPUT = REPO_ROOT / "docs" / "api-reference.md"


def load_schema(path: Path = CRD_FILE, version: str = "v2beta1", v2_patch: Path = V2_PATCH_FILE) -> Schema:
    """The schema of VERSION: from the CRD at PATH, or, for a version it lacks (v2 is opt-in), from the version the
    patch V2_PATCH adds."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the CRD is about 520 kB
    crd = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    versions = list(crd["spec"]["versions"])
    if all(v["name"] != version for v in versions):
        patch = yaml.load(v2_patch.read_text(encoding="utf-8"), Loader=loader)
        versions += [op["value"] for op in patch if op["path"] == "/spec/versions/-"]
    schema: Schema = next(v for v in versions if v["name"] == version)["schema"]["openAPIV3Schema"]
    return schema


def generate(schema: Schema, v2_schema: Schema | None = None) -> str:
    """The page, v2beta1 then what v2 adds; ValueError when the models and the CRD disagree."""
    v2_schema = v2_schema if v2_schema is not None else load_schema(version="v2")
    problems = mismatches(schema) + [f"v2: {p}" for p in mismatches(v2_schema, MPIJobV2)]
    if problems:
        raise ValueError("the models (shared/api/types.py, v2types.py) and the CRD disagree:\n  "
                         + "\n  ".join(problems))
    docs = type_docs()
    v2_docs = [d for d in type_docs(MPIJobV2) if d.model not in {MPIJobV2, MPIJob, MPIJobSpec}
               and all(d.model is not other.model for other in docs)]
    return render(docs, collect(docs), schema) + "\n" + render_v2(v2_docs, v2_schema)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="file to write, or - for stdout")
    parser.add_argument("--check", action="store_true", help="exit 1 with a diff if --output is not up to date")
    args = parser.parse_args(argv)
    try:
        text = generate(load_schema())
    except ValueError as error:
        print(f"gen_api_reference: {error}", file=sys.stderr)
        return 2
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    output = Path(args.output)
    if args.check:
        current = output.read_text(encoding="utf-8") if output.exists() else ""
        diff = list(difflib.unified_diff(current.splitlines(True), text.splitlines(True), str(output), "generated"))
        sys.stdout.writelines(diff)
        if diff:
            print(f"{output} is out of date: run `make api-reference`", file=sys.stderr)
        return 1 if diff else 0
    output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
