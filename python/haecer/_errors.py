"""Exceptions: every failure of the C library becomes one, with the library's own sentence."""
from __future__ import annotations

import errno as _errno

from haecer._lib import lib


class HaecerError(OSError):
    """A call into libhaecer failed. ``errno`` is the C library's error (positive), ``detail``
    the sentence it gave for it (haecer_error_detail: msrd's words for a refusal)."""

    def __init__(self, code: int, detail: str, what: str = ""):
        self.detail = detail
        generic = (lib.haecer_strerror(-code) or b"").decode(errors="replace")
        text = detail or generic
        super().__init__(code, f"{what}: {text}" if what else text)


class Denied(HaecerError, PermissionError):
    """msrd's policy refused it (EPERM, EACCES); ``detail`` is msrd's sentence."""


class Unavailable(HaecerError):
    """The CPU (or the simulated model) has no such event, counter or energy domain, or the
    name is unknown (EOPNOTSUPP, ENOENT, ENXIO)."""


class NotConnected(HaecerError, ConnectionError):
    """msrd cannot be reached: not started, a wrong socket, or gone (ENOTCONN, ECONNREFUSED,
    EPIPE, ECONNRESET, EPROTO)."""


_KINDS = {
    _errno.EPERM: Denied, _errno.EACCES: Denied,
    _errno.EOPNOTSUPP: Unavailable, _errno.ENOENT: Unavailable, _errno.ENXIO: Unavailable,
    _errno.ENOTCONN: NotConnected, _errno.ECONNREFUSED: NotConnected, _errno.EPIPE: NotConnected,
    _errno.ECONNRESET: NotConnected, _errno.EPROTO: NotConnected,
}


def error_of(status: int, what: str = "", detail: str | None = None) -> HaecerError:
    """The exception for a negative errno value the C library returned."""
    code = -status
    if detail is None:
        detail = (lib.haecer_error_detail() or b"").decode(errors="replace")
    return _KINDS.get(code, HaecerError)(code, detail, what)


def check(status: int, what: str = "") -> int:
    """status when it is not an error, else raise its exception."""
    if status < 0:
        raise error_of(status, what)
    return status
