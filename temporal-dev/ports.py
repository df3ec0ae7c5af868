"""Addresses and free ports for a server on this machine."""

from __future__ import annotations

import random
import socket
from pathlib import Path
from typing import Final

#: Lowest automatically picked port: keeps clear of the well-known and
#: commonly configured service ports (databases, web servers, ...).
PORT_FLOOR: Final = 20000


def connect_host(ip: str) -> str:
    """Host a client should dial for a server bound to ``ip``."""
    if ip in ("", "0.0.0.0"):
        return "127.0.0.1"
    if ip == "::":
        return "[::1]"
    if ":" in ip and not ip.startswith("["):
        return f"[{ip}]"
    return ip


def split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address must be host:port, got {address!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def free_port(ip: str) -> int:
    """A port that is free on ``ip`` right now, preferably outside the ephemeral range.

    The dev server itself binds several listeners on kernel-assigned
    (ephemeral) ports while starting, so a port we got from ``bind(0)`` could
    be handed to one of them before the server binds it for us. Choosing
    below the ephemeral range avoids that race; a lost race with some other
    process is retried by :meth:`DevServer.astart`.
    """
    host = connect_host(ip).strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    low, _ = _ephemeral_port_range()
    if low - PORT_FLOOR >= 1000:
        for _ in range(50):
            port = random.randrange(PORT_FLOOR, low)
            if _can_bind(family, host, port):
                return port
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        bound: int = sock.getsockname()[1]
        return bound


def _ephemeral_port_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # the Linux default


def _can_bind(family: socket.AddressFamily, host: str, port: int) -> bool:
    # No SO_REUSEADDR: also reject ports with lingering TIME_WAIT connections,
    # which is conservative (the server's listener could bind those).
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True
