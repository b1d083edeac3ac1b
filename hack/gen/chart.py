#!/usr/bin/env python3
"""Copy the chart's fixed objects from the kustomize base, deploy/, into deploy/chart/mpi-operator.

The reconciler's ClusterRole and the aggregated user roles have no values, so the chart holds copies of deploy/'s
files, each object given the labels its kustomization adds (deploy/kustomization.yaml); the files keep their
comments. The one value of the copies: rbac.aggregateToDefaultRoles adds Kubernetes' aggregation labels to the user
roles (kubeflow-mpijobs-edit into admin and edit, kubeflow-mpijobs-view into view), as template lines. The CRD
(deploy/crds/, with the labels of deploy/crds/kustomization.yaml) and the JSON patch of the component
deploy/components/api-v2 that turns kubeflow.org/v2 on go into files/crds/, which templates/crd.yaml reads
(values crds.enabled, crds.keep, apiVersions.v2). The alert rules and the Grafana dashboard of deploy/monitoring are
copied as they are into files/, which the PrometheusRule and the dashboard ConfigMap templates read. The kustomize
component deploy/monitoring/prometheus-operator, which kustomize lets read no file above it, gets the same objects
from deploy/monitoring: a copy of the dashboard, the reconciler's metrics Service with deploy/'s labels, and a
PrometheusRule whose spec is the rule file (its comments kept). Chart.yaml's
`version` and `appVersion` are the project's one version, pyproject.toml's `version` (RELEASE.md): the images of a
release are tagged with it and the chart's image tags default to appVersion. `--check` exits 1 when a copy is
stale. tests/unit/test_chart.py compares every object the chart renders with kustomize's.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import textwrap
import tomllib
from collections.abc import Sequence
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
DEPLOY = REPO_ROOT / "deploy"
CHART = DEPLOY / "chart" / "mpi-operator"
COPIES = {  # source in deploy/ -> copy in the chart
    "crds/kubeflow.org_mpijobs.yaml": "files/crds/kubeflow.org_mpijobs.yaml",
    "rbac/cluster-role.yaml": "templates/cluster-role.yaml",
    "rbac/user-roles.yaml": "templates/user-roles.yaml",
}
VERBATIM = {  # source in deploy/ -> a file of the chart that templates read as data (.Files.Get), copied as it is
    "monitoring/prometheus-rules.yaml": "files/prometheus-rules.yaml",
    "monitoring/grafana-dashboard.json": "files/grafana-dashboard.json",
    "components/api-v2/crd-patch.yaml": "files/crds/api-v2-patch.yaml",
}
COMPONENT = DEPLOY / "monitoring" / "prometheus-operator"  # the Prometheus Operator's kustomize component
RULE_LABELS = {"app.kubernetes.io/part-of": "mpijob-operator"}  # the chart's (templates/_helpers.tpl, partOf)
STALE = ("crds/kubeflow.org_mpijobs.yaml",)  # files of earlier layouts, removed (the CRD left crds/ for templates/)
AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"
TEMPLATED_LABELS = {  # a copied object's name -> template lines added to its labels
    name: ["    {{- if (.Values.rbac | default dict).aggregateToDefaultRoles }}",
           *(f'    {AGGREGATE}{role}: "true"' for role in roles), "    {{- end }}"]
    for name, roles in (("kubeflow-mpijobs-edit", ("admin", "edit")), ("kubeflow-mpijobs-view", ("view",)))}
KUSTOMIZATIONS = {  # the kustomization that builds a source, by its first directory; deploy/ for the others
    "crds": DEPLOY / "crds" / "kustomization.yaml",
}


def common_labels(kustomization: Path) -> dict[str, str]:
    """The label pairs a kustomization adds to every object's metadata."""
    spec = yaml.safe_load(kustomization.read_text(encoding="utf-8"))
    labels: dict[str, str] = {}
    for entry in spec.get("labels", []):
        labels.update(entry.get("pairs", {}))
    return labels


def _label_document(lines: list[str], labels: dict[str, str]) -> list[str]:
    """One YAML document's lines with LABELS added under its top-level metadata (block style, two spaces)."""
    start = lines.index("metadata:")
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith((" ", "#"))),
               len(lines))
    entries = [f"    {key}: {yaml.safe_dump(value).splitlines()[0]}" for key, value in labels.items()]
    name = next((line.split(":", 1)[1].strip() for line in lines[start:end] if line.startswith("  name:")), "")
    templated = TEMPLATED_LABELS.get(name, [])
    if "  labels:" in lines[start:end]:
        at = lines.index("  labels:", start, end) + 1
        after = next((i for i in range(at, end) if not lines[i].startswith("    ")), end)
        return [*lines[:at], *entries, *lines[at:after], *templated, *lines[after:]]
    return [*lines[:start + 1], "  labels:", *entries, *templated, *lines[start + 1:]]


def labelled(text: str, labels: dict[str, str], source: str) -> str:
    """TEXT (YAML documents separated by `---` lines) with LABELS in every document, under a header naming SOURCE."""
    documents: list[list[str]] = [[]]
    for line in text.splitlines():
        if line == "---":
            documents.append([])
        else:
            documents[-1].append(line)
    out = [f"# Copied from deploy/{source} by hack/gen/chart.py (`make chart`); DO NOT EDIT."]
    for i, document in enumerate(documents):
        if i:
            out.append("---")
        out.extend(_label_document(document, labels))
    return "\n".join(out) + "\n"


def prometheus_rule(rules: str, labels: dict[str, str]) -> str:
    """The PrometheusRule `mpi-operator` (namespace mpi-operator, LABELS) whose spec is RULES, a Prometheus rule file's
    text, indented as it is (its comments kept)."""
    head = ["# Made from deploy/monitoring/prometheus-rules.yaml by hack/gen/chart.py (`make chart`); DO NOT EDIT.",
            "apiVersion: monitoring.coreos.com/v1", "kind: PrometheusRule", "metadata:", "  name: mpi-operator",
            "  namespace: mpi-operator", "  labels:",
            *(f"    {key}: {yaml.safe_dump(value).splitlines()[0]}" for key, value in labels.items()), "spec:"]
    return "\n".join(head) + "\n" + textwrap.indent(rules, "  ")


def component() -> dict[Path, str]:
    """The generated files of the kustomize component deploy/monitoring/prometheus-operator."""
    monitoring = DEPLOY / "monitoring"
    return {
        COMPONENT / "grafana-dashboard.json": (monitoring / "grafana-dashboard.json").read_text(encoding="utf-8"),
        COMPONENT / "reconciler-metrics-service.yaml": labelled(
            (monitoring / "reconciler-metrics-service.yaml").read_text(encoding="utf-8"),
            common_labels(DEPLOY / "kustomization.yaml"), "monitoring/reconciler-metrics-service.yaml"),
        COMPONENT / "prometheus-rule.yaml": prometheus_rule(
            (monitoring / "prometheus-rules.yaml").read_text(encoding="utf-8"), RULE_LABELS),
    }


def kustomization_of(source: str) -> Path:
    """The kustomization whose build holds SOURCE (a path under deploy/)."""
    return KUSTOMIZATIONS.get(source.split("/", 1)[0], DEPLOY / "kustomization.yaml")


def project_version() -> str:
    """The one version of the project: pyproject.toml's [project] version."""
    with (REPO_ROOT / "pyproject.toml").open("rb") as file:
        version: str = tomllib.load(file)["project"]["version"]
    return version


def versioned_chart(text: str, version: str) -> str:
    """Chart.yaml's TEXT with its top-level `version` and `appVersion` set to VERSION (the rest kept as it is)."""
    text = re.sub(r"^version: .*$", f"version: {version}", text, count=1, flags=re.MULTILINE)
    return re.sub(r"^appVersion: .*$", f'appVersion: "{version}"', text, count=1, flags=re.MULTILINE)


def expected() -> dict[Path, str]:
    chart_yaml = CHART / "Chart.yaml"
    return {chart_yaml: versioned_chart(chart_yaml.read_text(encoding="utf-8"), project_version())} | {
        CHART / copy: labelled((DEPLOY / source).read_text(encoding="utf-8"),
                               common_labels(kustomization_of(source)), source)
        for source, copy in COPIES.items()} | {
        CHART / copy: ("" if source.endswith(".json") else  # JSON has no comments: the copy is the file, byte for byte
                       f"# Copied from deploy/{source} by hack/gen/chart.py (`make chart`); DO NOT EDIT.\n")
                      + (DEPLOY / source).read_text(encoding="utf-8")
        for source, copy in VERBATIM.items()} | component()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 with a diff if a copy is not up to date")
    args = parser.parse_args(argv)
    stale = 0
    for old in (CHART / name for name in STALE if (CHART / name).exists()):
        if args.check:
            stale += 1
            print(f"{old.relative_to(REPO_ROOT)}: no longer part of the chart", file=sys.stderr)
        else:
            old.unlink()
            if old.parent != CHART and not any(old.parent.iterdir()):
                old.parent.rmdir()
    for path, text in expected().items():
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current == text:
            continue
        if args.check:
            stale += 1
            sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                                       str(path.relative_to(REPO_ROOT)), "expected", n=1))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"gen_chart: {stale} stale file(s); run `make chart`", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
