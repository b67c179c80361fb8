"""`free_port`: a TCP port free on this machine right now, for a child process to bind.

A leaf helper (no SageMaker, no Locust): the Locust master a run starts takes its port from here, and
so do the tests that start servers. The local endpoint binds its own socket instead
(`endpoint.server.listening_socket`), so no other process can take its port in between.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path


def _ephemeral_low() -> int | None:
    """The low end of Linux's ephemeral port range, from which bind(port 0) and outgoing connections
    take their ports; None where it cannot be read."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on host right now, for another process to bind (the local endpoint binds
    its own: `endpoint.server.listening_socket`). Picked at random below the ephemeral range where there is room, so no
    bind(port 0) or outgoing connection of another process takes it before that process binds it;
    only another such pick could (about 1 in 12,000)."""
    low = _ephemeral_low()
    if low is not None and low > 1024 + 4096:
        for _ in range(64):
            port = random.randrange(max(1024, low - 12768), low)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]
