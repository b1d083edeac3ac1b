"""Our processes change nothing private in the libraries they use (docs/reconciler.md, Tuning): importing every
module of both components and configuring logging leaves the standard library's asyncio and logging and
aiohttp's connector as they were."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import asyncio.sslproto, logging, sys
import aiohttp

def state():
    watched = {"asyncio.sslproto.SSLProtocol": asyncio.sslproto.SSLProtocol, "logging": logging,
               "aiohttp.TCPConnector": aiohttp.TCPConnector, "aiohttp.ClientSession": aiohttp.ClientSession}
    # identities: a registry that fills up (logging's handler list) is the same object; a patch is another
    return {name: {key: id(value) for key, value in vars(owner).items()} for name, owner in watched.items()}

before = state()
import reconciler.__main__, reconciler.runtime.client, webhook.__main__, webhook.tls
from shared.logs import configure_logging
configure_logging("info")
configure_logging("info", "json", per_loop_turn=True)
after = state()
changed = sorted(f"{name}.{key}" for name in before for key in before[name].keys() | after[name].keys()
                 if before[name].get(key) != after[name].get(key))
print(changed)
"""


def test_importing_and_configuring_patches_no_library() -> None:
    result = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "[]"
