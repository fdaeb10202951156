"""The real-node network: addresses only in 198.18.0.0/15 (RFC 2544's benchmarking range), on links the run
creates, with no route off the machine.

| what                         | address                     | link                    |
|------------------------------|-----------------------------|-------------------------|
| API server, S3 (host side)   | 198.18.0.1/32               | bridge `ftsp0`, no port |
| node N and its pods          | 198.18.N.0/24, node 198.18.N.1 | bridge `ftspN` (CNI's) |
| Services (kube-proxy)        | 198.19.0.0/24               | iptables only           |

Pods route only 198.18.0.0/15 (their gateway is their node's bridge): nothing they send leaves the machine.
Nodes reach each other's pods through the host's routing table, which needs IPv4 forwarding (restored at
teardown with the other sysctls).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from pathlib import Path

HOST_ADDRESS = "198.18.0.1"
SERVICE_CIDR = "198.19.0.0/24"
POD_NETWORK = "198.18.0.0/15"
CLUSTER_CIDR = "198.18.0.0/16"
LINK_PREFIX = "ftsp"
HOST_LINK = f"{LINK_PREFIX}0"
CNI_NETWORK = "ftspark-realnodes"


def node_link(index: int) -> str:
    return f"{LINK_PREFIX}{index}"


def node_address(index: int) -> str:
    return f"198.18.{index}.1"


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=30)


def add_bridge(name: str, address: str) -> None:
    """A bridge holding address (a CIDR). With no port it still gives the host that address: how the host
    side (API server, S3) gets an address pods can reach."""
    ip("link", "add", name, "type", "bridge")
    ip("addr", "add", address, "dev", name)
    ip("link", "set", name, "up")


def delete_link(name: str) -> None:
    with contextlib.suppress(subprocess.CalledProcessError):
        ip("link", "del", name)


def our_links() -> list[str]:
    return sorted(p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith(LINK_PREFIX))


def cni_conflist(index: int, ipam_dir: Path) -> str:
    """CNI's bridge plugin on the node's own bridge: no masquerade, no default route."""
    subnet = f"198.18.{index}.0/24"
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": CNI_NETWORK,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": node_link(index),
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "dataDir": str(ipam_dir),
                        "ranges": [[{"subnet": subnet, "gateway": node_address(index)}]],
                        "routes": [{"dst": POD_NETWORK}],
                    },
                }
            ],
        },
        indent=2,
    )
