"""Our kubeconfig reader: the forms a controller meets, read without kubernetes-asyncio's 60 MiB loader."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.runtime.client import StartupError
from reconciler.runtime.kubeconfig import (
    ClientConfig,
    KubeconfigError,
    client_config,
    kubeconfig_paths,
    load_configuration,
    read_kubeconfigs,
    uses_plugin,
)

CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def load_kubeconfig(*paths: Path) -> ClientConfig:
    """What ``load_configuration`` builds from these files when no credential plugin is involved."""
    return client_config(read_kubeconfigs(paths))


def needs_plugin(*paths: Path) -> bool:
    """Whether ``load_configuration`` hands these files to kubernetes-asyncio's loader."""
    return uses_plugin(read_kubeconfigs(paths))


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def kubeconfig(tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any] | None = None,
               current: str = "c") -> Path:
    document = {"apiVersion": "v1", "kind": "Config", "current-context": current,
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                "clusters": [{"name": "k", "cluster": cluster}], "users": [{"name": "u", "user": user or {}}]}
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(document))
    return path


def test_inline_certificates_and_ca(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, {"server": "https://127.0.0.1:6443/", "certificate-authority-data": b64(CA)},
                      {"client-certificate-data": b64("CERT"), "client-key-data": b64("KEY")})
    config = load_kubeconfig(path)
    assert (config.host, config.ca_data, config.ssl_ca_cert, config.verify_ssl) == (
        "https://127.0.0.1:6443", CA, None, True)
    assert config.cert_file is not None
    assert config.key_file is not None
    assert Path(config.cert_file).read_text() == "CERT"
    assert Path(config.key_file).read_text() == "KEY"
    assert Path(config.key_file).stat().st_mode & 0o077 == 0


def test_files_relative_to_the_kubeconfig_and_a_token(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_text(CA)
    path = kubeconfig(tmp_path, {"server": "https://h:1", "certificate-authority": "ca.crt",
                                 "insecure-skip-tls-verify": True}, {"token": "abc"})
    config = load_kubeconfig(path)
    assert config == ClientConfig("https://h:1", ssl_ca_cert=str(tmp_path / "ca.crt"), verify_ssl=False, token="abc")


async def test_a_token_file_is_read_again(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one\n")
    config = load_kubeconfig(kubeconfig(tmp_path, {"server": "https://h:1"}, {"tokenFile": str(token)}))
    assert await config.auth_settings() == {"BearerToken": {"value": "Bearer one"}}
    token.write_text("two\n")
    config._read_at -= 61  # a minute later
    assert await config.auth_settings() == {"BearerToken": {"value": "Bearer two"}}


@pytest.mark.parametrize(("cluster", "user", "current", "message"), [
    pytest.param({"server": "https://h:1"}, {}, "", "it names no current-context", id="no current context"),
    pytest.param({"server": "https://h:1"}, {}, "other", "no context named 'other'", id="unknown context"),
    pytest.param({}, {}, "c", "the current context's cluster has no server", id="no server"),
    pytest.param({"server": "https://h:1", "certificate-authority": "missing.crt"}, {}, "c",
                 "certificate-authority {dir}/missing.crt: no such file", id="missing CA file"),
    pytest.param({"server": "https://h:1", "certificate-authority-data": "not base64!"}, {}, "c",
                 "certificate-authority-data is not base64", id="bad base64"),
    pytest.param({"server": "https://h:1"}, {"client-certificate-data": b64("C")}, "c",
                 "a client certificate needs both a certificate and a key", id="certificate without key"),
])
def test_unusable_kubeconfigs(tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any], current: str,
                              message: str) -> None:
    with pytest.raises(KubeconfigError) as raised:
        load_kubeconfig(kubeconfig(tmp_path, cluster, user, current))
    assert str(raised.value) == message.format(dir=tmp_path)


def test_credential_plugins_are_left_to_kubernetes_asyncio(tmp_path: Path) -> None:
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "get-token"}}
    assert needs_plugin(kubeconfig(tmp_path, {"server": "https://h:1"}, exec_user))
    assert not needs_plugin(kubeconfig(tmp_path, {"server": "https://h:1"}, {"token": "t"}))


def test_the_reconciler_never_imports_kubernetes_asyncio_for_a_plain_kubeconfig(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, {"server": "https://127.0.0.1:1"}, {"token": "t"})
    code = ("import asyncio, sys\n"
            "from reconciler.runtime.kubeconfig import load_configuration\n"
            f"asyncio.run(load_configuration({str(path)!r}))\n"
            "import reconciler.__main__\n"
            "print(sorted(m for m in sys.modules if m.startswith('kubernetes_asyncio')))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "[]"


def test_an_idle_reconciler_imports_no_yaml_nor_cryptography() -> None:
    """In its cluster the reconciler reads no kubeconfig (PyYAML), and cryptography is imported by the first SSH
    key, so an idle process holds neither."""
    code = ("import sys\n"
            "import reconciler.__main__\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'yaml', 'cryptography', 'kubernetes_asyncio'}))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "[]"


def write(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def listed(*paths: Path | str) -> str:
    return os.pathsep.join(str(path) for path in paths)


def two_kubeconfigs(tmp_path: Path) -> tuple[Path, Path]:
    """The first file names the context and its cluster (CA file beside it); the second, in another directory,
    has the user (token file beside it) and its own, shadowed, entries of the same names."""
    (tmp_path / "one" / "ca.crt").parent.mkdir()
    (tmp_path / "one" / "ca.crt").write_text(CA)
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "token").write_text("from-two\n")
    one = write(tmp_path / "one" / "config", {
        "current-context": "ctx",
        "contexts": [{"name": "ctx", "context": {"cluster": "k", "user": "u"}}],
        "clusters": [{"name": "k", "cluster": {"server": "https://one:1", "certificate-authority": "ca.crt"}}]})
    two = write(tmp_path / "two" / "config", {
        "current-context": "other",
        "contexts": [{"name": "ctx", "context": {"cluster": "shadowed", "user": "shadowed"}},
                     {"name": "other", "context": {"cluster": "k", "user": "u"}}],
        "clusters": [{"name": "k", "cluster": {"server": "https://two:2", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"tokenFile": "token"}}]})
    return one, two


async def test_several_kubeconfigs_merge_as_kubectl_merges_them(tmp_path: Path) -> None:
    """The first file that sets a cluster, user or context name (or current-context) wins, with the whole entry;
    relative file names are resolved against the directory of the file that holds them."""
    one, two = two_kubeconfigs(tmp_path)
    config = await load_configuration(listed(one, two))
    assert (config.host, config.ssl_ca_cert, config.verify_ssl) == ("https://one:1", str(tmp_path / "one" / "ca.crt"),
                                                                     True)
    assert await config.auth_settings() == {"BearerToken": {"value": "Bearer from-two"}}
    swapped = await load_configuration(listed(two, one))
    assert (swapped.host, swapped.ssl_ca_cert, swapped.verify_ssl) == ("https://two:2", None, False)


def test_current_context_comes_from_the_first_file_that_sets_it(tmp_path: Path) -> None:
    one, two = two_kubeconfigs(tmp_path)
    write(one, {**yaml.safe_load(one.read_text()), "current-context": ""})
    assert load_kubeconfig(one, two).host == "https://one:1"  # two's "other" context, with one's cluster k
    assert load_kubeconfig(two, one).host == "https://two:2"


async def test_missing_files_and_empty_elements_are_skipped(tmp_path: Path) -> None:
    one, two = two_kubeconfigs(tmp_path)
    config = await load_configuration(listed("", tmp_path / "missing", one, "", two, one))
    assert config.host == "https://one:1"
    assert kubeconfig_paths(listed("", tmp_path / "missing", one, "", two, one)) == [str(one), str(two)]


@pytest.mark.parametrize(("elements", "message"), [
    pytest.param(["missing"], "kubeconfig {dir}/missing: no such file", id="one file"),
    pytest.param(["a", "b"], "kubeconfig {dir}/a:{dir}/b: none of these files exists", id="several files"),
])
async def test_no_existing_kubeconfig_is_refused_with_the_names(tmp_path: Path, elements: list[str],
                                                               message: str) -> None:
    with pytest.raises(StartupError) as raised:
        await load_configuration(listed(*(tmp_path / e for e in elements)))
    assert str(raised.value) == message.format(dir=tmp_path).replace(":", os.pathsep)


async def test_a_broken_file_among_several_is_named(tmp_path: Path) -> None:
    one, _ = two_kubeconfigs(tmp_path)
    broken = tmp_path / "broken"
    broken.write_text("clusters: [unclosed\n")
    with pytest.raises(StartupError, match=f"is not usable: {broken}: "):
        await load_configuration(listed(one, broken))


def test_a_credential_plugin_in_any_of_the_files_is_seen(tmp_path: Path) -> None:
    one, two = two_kubeconfigs(tmp_path)
    write(two, {"users": [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                          "command": "get-token"}}}]})
    assert needs_plugin(one, two)
    assert not needs_plugin(one)


async def test_a_credential_plugin_with_several_files_runs(tmp_path: Path) -> None:
    """kubernetes-asyncio's loader, given the files merged as kubectl merges them (its own merging takes
    current-context from the last file that sets it, not the first)."""
    one, two = two_kubeconfigs(tmp_path)
    credential = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": "from-plugin"}}
    write(two, {"current-context": "other", "users": [{"name": "u", "user": {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
        "args": ["-c", f"print({json.dumps(json.dumps(credential))})"], "interactiveMode": "Never"}}}]})
    config = await load_configuration(listed(one, two))
    assert config.host == "https://one:1"
    assert config.ssl_ca_cert == str(tmp_path / "one" / "ca.crt")
    assert config.api_key["BearerToken"] == "Bearer from-plugin"
