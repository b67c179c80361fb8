"""`KeepAliveServer`: the smallest HTTP/1.1 server that answers requests on kept-alive connections.

A stand-in for an endpoint where the server's own cost must not be measured: a raw gevent
StreamServer that frames requests by Content-Length and answers each with the bytes `answer(head,
address)` returns (pywsgi adds ~40 ms per reused connection, which would be timed as the client's).
The transport benchmark (bench/transport.py) answers every request with one constant response; the
tests' traffic-mix recorder (tests/fakes.py `TargetRecorder`) answers by the request's headers. One
framing loop for both, in the package, so bench/ never imports tests/. Binds 127.0.0.1.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Self

from gevent.server import StreamServer

Answer = Callable[[bytes, object], bytes]  # (request head without the blank line, peer address) -> response bytes


def header_value(head: bytes, name: bytes) -> bytes | None:
    """The value of header `name` (lower case) in a request head, or None."""
    at = head.lower().find(b"\r\n" + name + b":")
    if at < 0:
        return None
    start = at + len(name) + 3
    end = head.find(b"\r\n", start)
    return head[start:end if end >= 0 else len(head)].strip()


class KeepAliveServer:
    """`with KeepAliveServer(answer) as server: server.url` (port 0: a free one), or `serve_forever()`."""

    def __init__(self, answer: Answer, port: int = 0, host: str = "127.0.0.1", backlog: int = 1024):
        self.answer = answer
        self.server = StreamServer((host, port), self._handle, backlog=backlog)

    def __enter__(self) -> Self:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop(timeout=1)

    def serve_forever(self) -> None:
        self.server.serve_forever()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def _handle(self, sock: socket.socket, address: object) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buffer = b""
        while True:
            data = sock.recv(262144)
            if not data:
                return
            buffer += data
            while True:
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    break
                head = buffer[:end]
                length = header_value(head, b"content-length")
                size = int(length) if length else 0
                if len(buffer) < end + 4 + size:
                    break
                buffer = buffer[end + 4 + size:]
                sock.sendall(self.answer(head, address))
