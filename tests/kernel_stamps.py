"""Hold the kernel's receive stamping on for client tests (a helper, not a test module).

Linux stamps received segments only while some socket of the machine asks for it, and switches that on
lazily (deferred work: ``net_enable_timestamp`` in the kernel's net/core/dev.c), so a connection opened just
before its data arrives can miss stamps (``helpers.client.rxclock``). ``stamping_on`` holds a stamped
connection, as a load test's pool does, until it sees stamps, and keeps it open until the block ends.
"""
from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

from helpers.client.rxclock import KERNEL_STAMPS, SO_TIMESTAMPNS


@contextlib.contextmanager
def stamping_on() -> Iterator[bool]:
    """Kernel stamping on for the block; yields whether stamps were seen (False off Linux)."""
    if not KERNEL_STAMPS:
        yield False
        return
    with socket.create_server(("127.0.0.1", 0)) as listener, \
            socket.create_connection(listener.getsockname()) as probe:
        probe.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        server, _ = listener.accept()
        with server:
            seen = False
            for _ in range(200):
                server.sendall(b".")
                if probe.recvmsg(1, 64)[1]:
                    seen = True
                    break
                time.sleep(0.005)
            yield seen
