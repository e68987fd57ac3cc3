"""Ask a web server whether it answers, as a container's healthcheck does: ``python -m shared.probe URL``.

Plain Python, no Django, so it starts in milliseconds however often it runs.
Exit 0 when the answer's status is 200, 1 otherwise, with the status line or
the error on standard error.

``--proxy-protocol``: the compose file's daphne listens on Twisted's haproxy:
endpoint (Caddy names each client in a PROXY protocol line), which closes any
connection that does not start with such a line; the probe sends one naming
its own connection.
"""

from __future__ import annotations

import argparse
import socket
import sys
from urllib.parse import urlsplit


def proxy_line(conn: socket.socket) -> bytes:
    """The PROXY protocol (v1) line for this connection: its own two ends, as a proxy would name them."""
    family = "TCP6" if conn.family == socket.AF_INET6 else "TCP4"
    source, destination = conn.getsockname(), conn.getpeername()
    return f"PROXY {family} {source[0]} {destination[0]} {source[1]} {destination[1]}\r\n".encode("ascii")


def status_of(url: str, proxy_protocol: bool = False, timeout: float = 5.0) -> str:
    """The status line a GET of ``url`` (http only) is answered with; OSError when none comes."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"not an http:// URL: {url}")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    with socket.create_connection((parts.hostname, parts.port or 80), timeout=timeout) as conn:
        request = proxy_line(conn) if proxy_protocol else b""
        request += (f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: close\r\n"
                    "User-Agent: takehome-probe\r\n\r\n").encode("ascii")
        conn.sendall(request)
        line = conn.makefile("rb").readline(1024).decode("latin-1").strip()
    if not line:
        raise ConnectionError("the server closed the connection without answering")
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.probe", description=__doc__.splitlines()[0])
    parser.add_argument("url", help="e.g. http://127.0.0.1:8000/healthz")
    parser.add_argument("--proxy-protocol", action="store_true",
                        help="open the connection with a PROXY protocol line, as Caddy does")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to connect, and for each read")
    options = parser.parse_args(argv)
    try:
        line = status_of(options.url, options.proxy_protocol, options.timeout)
    except (OSError, ValueError) as exc:
        print(f"{options.url}: {exc}", file=sys.stderr)
        return 1
    if line.split()[1:2] == ["200"]:
        return 0
    print(f"{options.url}: {line}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
