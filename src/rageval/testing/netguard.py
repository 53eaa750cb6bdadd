"""Refuse any network connection that would leave this machine.

Installed for the whole pytest session by ``tests/conftest.py``; usable in any CI with
``install_network_guard()``. The check runs before the real ``connect`` (and before a host name
is resolved), so a blocked attempt sends no packet at all, not even a DNS query.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

from rageval.errors import RagevalError

__all__ = ["NetworkBlockedError", "install_network_guard", "is_local_address"]

_ALLOWED = "127.0.0.0/8, ::1, localhost and AF_UNIX sockets"


class NetworkBlockedError(RagevalError, RuntimeError):
    """A connection to a non-loopback address was attempted while the guard was installed.

    Not an ``OSError`` on purpose: code that treats connection failures as transient must not
    retry this one or mistake it for a server that is down.
    """


def is_local_address(host: str | bytes | None) -> bool:
    """True for loopback (and unspecified) addresses and the name ``localhost``."""
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    name = host.strip("[]").split("%", 1)[0].lower().rstrip(".")
    if name in ("", "localhost") or name.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def _blocked(what: str) -> NetworkBlockedError:
    return NetworkBlockedError(
        f"network guard: {what} blocked; only {_ALLOWED} are reachable during tests"
    )


def _check_address(sock: socket.socket | None, address: Any) -> None:
    if sock is not None and sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    if isinstance(address, tuple) and address and not is_local_address(address[0]):
        raise _blocked(f"connection to {address[0]}:{address[1] if len(address) > 1 else '?'}")


def _check_lookup(host: str | bytes | None) -> None:
    # Resolving a name may send a DNS query, so only loopback names, IP literals (no query)
    # and this machine's own name (answered from /etc/hosts) may be looked up.
    if host is None or is_local_address(host):
        return
    text = host.decode("ascii", "replace") if isinstance(host, bytes) else host
    if _is_ip_literal(text) or text.lower() == socket.gethostname().lower():
        return
    raise _blocked(f"name lookup of {text!r}")


_installed: Callable[[], None] | None = None


def install_network_guard() -> Callable[[], None]:
    """Patch the socket module; return a function that restores it. Installing twice is a no-op
    that returns the first uninstaller."""
    global _installed
    if _installed is not None:
        return _installed

    originals: dict[tuple[Any, str], Any] = {}

    def patch(owner: Any, name: str, replacement: Any) -> None:
        originals[(owner, name)] = getattr(owner, name)
        setattr(owner, name, replacement)

    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_sendto = socket.socket.sendto
    real_create_connection = socket.create_connection
    real_getaddrinfo = socket.getaddrinfo
    real_gethostbyname = socket.gethostbyname
    real_gethostbyname_ex = socket.gethostbyname_ex

    def connect(self: socket.socket, address: Any) -> None:
        _check_address(self, address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        _check_address(self, address)
        return real_connect_ex(self, address)

    def sendto(self: socket.socket, data: Any, *args: Any) -> int:
        _check_address(self, args[-1] if args else None)
        return real_sendto(self, data, *args)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        _check_address(None, address)
        return real_create_connection(address, *args, **kwargs)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        _check_lookup(host)
        return real_getaddrinfo(host, *args, **kwargs)

    def gethostbyname(host: str) -> str:
        _check_lookup(host)
        return real_gethostbyname(host)

    def gethostbyname_ex(host: str) -> tuple[str, list[str], list[str]]:
        _check_lookup(host)
        return real_gethostbyname_ex(host)

    patch(socket.socket, "connect", connect)
    patch(socket.socket, "connect_ex", connect_ex)
    patch(socket.socket, "sendto", sendto)
    patch(socket, "create_connection", create_connection)
    patch(socket, "getaddrinfo", getaddrinfo)
    patch(socket, "gethostbyname", gethostbyname)
    patch(socket, "gethostbyname_ex", gethostbyname_ex)

    def uninstall() -> None:
        global _installed
        for (owner, name), original in originals.items():
            setattr(owner, name, original)
        _installed = None

    _installed = uninstall
    return uninstall
