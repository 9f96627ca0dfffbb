"""Free ports on loopback, for the servers the tests start."""

from __future__ import annotations

import socket

__all__ = ["free_port", "free_ports"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports free on loopback (a fleet serves P to
    P+count-1)."""
    for _ in range(50):
        first = free_port()
        if first + count > 65_535:
            continue
        probes = []
        try:
            for port in range(first, first + count):
                probe = socket.socket()
                probes.append(probe)
                probe.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for probe in probes:
                probe.close()
    raise RuntimeError("no run of free ports on loopback")
