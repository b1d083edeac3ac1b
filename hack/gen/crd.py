#!/usr/bin/env python3
"""Generate the MPIJob CRD, deploy/crds/kubeflow.org_mpijobs.yaml, and the patch that turns kubeflow.org/v2 on,
deploy/components/api-v2/crd-patch.yaml.

The default CRD serves and stores kubeflow.org/v2beta1 alone, with no conversion webhook: as with upstream's CRD,
reading, listing and deleting MPIJobs never calls a component of ours. kubeflow.org/v2 is opt-in (the kustomize
component deploy/components/api-v2, the ready overlay deploy/crds-v2, the chart's value apiVersions.v2): the patch
adds the v2 version, the conversion webhook and cert-manager's CA injection (docs/proposals/v2.md).

The MPIJob-owned part of the schema (spec, status) is declared here with upstream's types, formats,
enums and CRD defaults. The pod template schema is never written by hand: it is converted from the
core/v1 OpenAPI v3 document of a pinned Kubernetes release, read from the Go module
k8s.io/kubernetes (default), from a local copy (--openapi-file) or from a live API server
(--from-server --kubeconfig PATH). See docs/crd.md.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

if __package__ in (None, ""):  # run as `python hack/gen/crd.py`: make `hack.gen.crdgen` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hack.gen.crdgen.mpijob_schema import PRINTER_COLUMNS, mpijob_schema
from hack.gen.crdgen.sources import (
    K8S_MODULE,
    K8S_VERSION,
    MODULE_OPENAPI_FILE,
    SERVER_OPENAPI_PATH,
    SourceError,
    fetch_from_server,
    load_openapi_file,
    module_openapi_file,
)
from hack.gen.crdgen.structural import Converter, structural_problems
from hack.gen.crdgen.v2_schema import v2_schema

__all__ = ["K8S_VERSION", "Converter", "SourceError", "build_crd", "build_crd_with_v2", "build_v2_patch",
           "load_openapi_file", "main", "module_openapi_file", "render", "render_v2_patch", "structural_problems"]

Schema = dict[str, Any]

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUTPUT = REPO_ROOT / "deploy" / "crds" / "kubeflow.org_mpijobs.yaml"
V2_PATCH_OUTPUT = REPO_ROOT / "deploy" / "components" / "api-v2" / "crd-patch.yaml"
EXIT_DIFFERS = 1
EXIT_SOURCE_UNAVAILABLE = 3


def build_crd(schemas: Mapping[str, Schema]) -> Schema:
    """The default MPIJob CustomResourceDefinition, from the core/v1 component schemas: kubeflow.org/v2beta1
    served and stored, no conversion (strategy None, as upstream's), so no read depends on our webhook."""
    schema = mpijob_schema(Converter(schemas))
    names = {"categories": ["kubeflow"], "kind": "MPIJob", "listKind": "MPIJobList", "plural": "mpijobs",
             "shortNames": ["mpij"], "singular": "mpijob"}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "mpijobs.kubeflow.org"},
        "spec": {"group": "kubeflow.org", "names": names, "scope": "Namespaced",
                 "versions": [_version("v2beta1", schema, storage=True)]},
    }


def build_v2_patch(schemas: Mapping[str, Schema]) -> list[Schema]:
    """The JSON patch (RFC 6902) that turns kubeflow.org/v2 on in the default CRD: cert-manager's CA injection, the
    conversion webhook (the admission webhooks' Service, path /convert) and the v2 version, served, never stored."""
    v2 = _version("v2", v2_schema(mpijob_schema(Converter(schemas))), storage=False)
    return [
        # cert-manager's cainjector fills the conversion webhook's caBundle; with managed or manual certificates the
        # reconciler (--manage-webhook-certificates) or the admin patches it instead (deploy/certs/README.md)
        {"op": "add", "path": "/metadata/annotations", "value": {INJECT_CA_ANNOTATION: INJECT_CA_FROM}},
        {"op": "add", "path": "/spec/conversion", "value": copy.deepcopy(CONVERSION)},
        {"op": "add", "path": "/spec/versions/-", "value": v2},
    ]


def build_crd_with_v2(schemas: Mapping[str, Schema]) -> Schema:
    """The CRD with kubeflow.org/v2 on: the default CRD with build_v2_patch applied (what deploy/crds-v2 holds but
    for its labels)."""
    crd = build_crd(schemas)
    for op in build_v2_patch(schemas):
        if op["path"] == "/spec/versions/-":
            crd["spec"]["versions"].append(op["value"])
        else:
            parent, _, key = op["path"].rpartition("/")
            crd[parent.strip("/")][key] = op["value"]
    return crd


WEBHOOK_NAMESPACE, WEBHOOK_SERVICE = "mpi-operator", "mpijob-webhook"
INJECT_CA_ANNOTATION, INJECT_CA_FROM = "cert-manager.io/inject-ca-from", f"{WEBHOOK_NAMESPACE}/{WEBHOOK_SERVICE}"
CONVERSION: Schema = {"strategy": "Webhook", "webhook": {"clientConfig": {"service": {
    "name": WEBHOOK_SERVICE, "namespace": WEBHOOK_NAMESPACE, "path": "/convert", "port": 443}},
    "conversionReviewVersions": ["v1"]}}


def _version(name: str, schema: Schema, *, storage: bool) -> Schema:
    problems = structural_problems(schema)
    if problems:
        raise ValueError(f"the generated {name} schema is not structural:\n  " + "\n  ".join(problems))
    return {
        "additionalPrinterColumns": copy.deepcopy(PRINTER_COLUMNS),
        "name": name,
        "schema": {"openAPIV3Schema": schema},
        "served": True,
        "storage": storage,
        "subresources": {"status": {}},
    }


# ---------------------------------------------------------------------------------------------
# Output


class _Dumper(yaml.SafeDumper):
    """Block style, multi-line strings as literal blocks, and no anchors/aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _represent_str)


def header(version: str, what: str = "# The MPIJob CRD: kubeflow.org/v2beta1, served and stored, with no conversion "
           "webhook (kubeflow.org/v2 is opt-in: deploy/crds-v2/).\n") -> str:
    return (
        "# Code generated by hack/gen/crd.py; DO NOT EDIT. Regenerate with `make crd` (see docs/crd.md).\n"
        + what +
        f"# The pod template schema is converted from the core/v1 OpenAPI v3 document of Kubernetes {version}:\n"
        f"# {MODULE_OPENAPI_FILE} in the Go module {K8S_MODULE}@{version},\n"
        f"# which a {version} API server also serves at {SERVER_OPENAPI_PATH}.\n"
    )


V2_PATCH_HEADER = (
    "# The JSON patch of the component deploy/components/api-v2 that turns kubeflow.org/v2 on: the v2 version\n"
    "# (served, never stored), the conversion webhook and cert-manager's CA injection. With it, every read of an\n"
    "# MPIJob through v2, kubectl's preferred version, calls the webhook (docs/proposals/v2.md).\n")


def _dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1_000_000,
                     allow_unicode=True)


def render(crd: Schema, version: str = K8S_VERSION) -> str:
    """The CRD as deterministic YAML, preceded by the generated-file header."""
    return header(version) + _dump(crd)


def render_v2_patch(patch: list[Schema], version: str = K8S_VERSION) -> str:
    """The v2 patch (build_v2_patch) as deterministic YAML, preceded by the generated-file header."""
    return header(version, V2_PATCH_HEADER) + _dump(patch)


# ---------------------------------------------------------------------------------------------
# Command line


def load_schemas(args: argparse.Namespace) -> dict[str, Schema]:
    """The core/v1 component schemas from the source the arguments select."""
    if args.from_server:
        return fetch_from_server(Path(args.kubeconfig), args.k8s_version)
    if args.openapi_file:
        return load_openapi_file(Path(args.openapi_file))
    return load_openapi_file(module_openapi_file(args.k8s_version))


def check(output: Path, text: str) -> int:
    """0 if `output` holds `text`; otherwise print a unified diff and return EXIT_DIFFERS."""
    try:
        current = output.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = ""
    if current == text:
        return 0
    name = _display(output)
    sys.stdout.writelines(difflib.unified_diff(
        current.splitlines(keepends=True), text.splitlines(keepends=True), f"{name} (committed)",
        f"{name} (generated)"))
    print(f"gen_crd: {name} is out of date; run `make crd`", file=sys.stderr)
    return EXIT_DIFFERS


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--openapi-file", metavar="PATH", help=f"a local copy of {MODULE_OPENAPI_FILE}")
    source.add_argument("--from-server", action="store_true",
                        help=f"fetch {SERVER_OPENAPI_PATH} from the API server of --kubeconfig")
    parser.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig for --from-server (current context)")
    parser.add_argument("--k8s-version", default=K8S_VERSION, help="Kubernetes release (default %(default)s)")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="file to write, or - for stdout")
    parser.add_argument("--v2-output", metavar="PATH",
                        help="file to write the kubeflow.org/v2 patch to, or - for stdout (default: "
                             f"{_display(V2_PATCH_OUTPUT)} when --output is the default, else none)")
    parser.add_argument("--check", action="store_true", help="exit 1 with a diff if --output is not up to date")
    args = parser.parse_args(argv)
    if args.from_server and not args.kubeconfig:
        parser.error("--from-server needs --kubeconfig")
    if args.check and "-" in (args.output, args.v2_output):
        parser.error("--check needs files, not -")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        schemas = load_schemas(args)
    except SourceError as exc:
        print(f"gen_crd: {exc}", file=sys.stderr)
        return EXIT_SOURCE_UNAVAILABLE
    outputs = {args.output: render(build_crd(schemas), args.k8s_version)}
    v2_output = args.v2_output or (str(V2_PATCH_OUTPUT) if Path(args.output) == DEFAULT_OUTPUT else None)
    if v2_output:
        outputs[v2_output] = render_v2_patch(build_v2_patch(schemas), args.k8s_version)
    status = 0
    for name, text in outputs.items():
        if name == "-":
            sys.stdout.write(text)
            continue
        output = Path(name)
        if args.check:
            status = max(status, check(output, text))
            continue
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    return status


if __name__ == "__main__":
    sys.exit(main())
