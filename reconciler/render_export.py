"""``render --as jobset|trainjob``: each MPIJob document exported, the objects on stdout, on stderr the webhook's
warnings, then one ``Not expressed: ...`` line for each thing of the MPIJob the objects do not do, and for a job
that cannot be exported, why (exit status 1). A JobSet's Secret gets a new SSH key pair here, at the edge; the
exporters themselves are pure."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from reconciler.mpijob.sshkeys import generate_ssh_key_pair
from reconciler.render import RenderError, dump, print_warnings
from reconciler.render_jobset import Exported, export_jobset
from reconciler.render_trainjob import export_trainjob
from shared.jsondict import JSONDict


def export(document: Any, target: str, *, cluster_domain: str = "") -> Exported:
    if target == "jobset":
        return export_jobset(document, generate_ssh_key_pair(), cluster_domain=cluster_domain)
    return export_trainjob(document, cluster_domain=cluster_domain)


def export_documents(documents: Sequence[Any], target: str, file: str, *, output: str, cluster_domain: str) -> int:
    """Export every document; 1 when a document is not an MPIJob the webhook admits or cannot be exported, or
    when there is no document."""
    objects: list[JSONDict] = []
    failed = False
    for document in documents:
        try:
            exported = export(document, target, cluster_domain=cluster_domain)
        except RenderError as error:
            print_warnings(error.warnings)
            print(error, file=sys.stderr)
            failed = True
            continue
        print_warnings(exported.warnings)
        name = exported.objects[-1]["metadata"]["name"]
        for note in exported.not_expressed:
            print(f"Not expressed ({name}): {note}", file=sys.stderr)
        objects += exported.objects
    if not documents:
        print(f"python -m reconciler render: error: {file}: no MPIJob in it", file=sys.stderr)
    if objects:
        sys.stdout.write(dump(objects, output))
    return 1 if failed or not documents else 0
