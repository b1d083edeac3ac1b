"""The real node's CoreDNS configuration for a cluster domain (RealNodeCluster.custom_cluster_domain; the e2e test
is tests/e2e/test_cluster_domain.py)."""

from __future__ import annotations

from pathlib import Path

from hack.devcluster.realnode import NODE_IP, corefile


def test_the_default_serves_cluster_local_and_forwards_the_rest() -> None:
    text = corefile(["cluster.local"], Path("/k"))
    assert "kubernetes cluster.local in-addr.arpa ip6.arpa {" in text
    assert "forward . /etc/resolv.conf" in text
    assert "rcode NXDOMAIN" not in text


def test_a_custom_domain_alone_and_cluster_local_answered_nxdomain() -> None:
    text = corefile(["kube.local"], Path("/k"), unserved=["cluster.local"])
    assert "kubernetes kube.local in-addr.arpa ip6.arpa {" in text
    zone = f"cluster.local:53 {{\n    bind {NODE_IP}\n    template ANY ANY {{\n        rcode NXDOMAIN\n    }}\n}}\n"
    assert zone in text
    assert text.count("kubernetes ") == 1


def test_a_served_domain_is_never_answered_nxdomain() -> None:
    assert "NXDOMAIN" not in corefile(["cluster.local", "kube.local"], Path("/k"), unserved=["cluster.local"])
