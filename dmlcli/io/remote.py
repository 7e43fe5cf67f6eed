"""Why a remote store (an fsspec URL) failed, in the user's terms: unreachable, or a back end not installed.

Both are the environment's fault, not the input's, so both are exit 4 (BackendUnavailableError), as an
unreachable Dask scheduler is: the message names the address and what failed, or the package to install.
Anything else (a store that answers but holds no array, malformed metadata) stays the caller's to report.
"""

from __future__ import annotations

import errno

from ..errors import BackendUnavailableError, first_line

# errno values that mean the network, not the store, failed.
_NETWORK_ERRNOS = frozenset(getattr(errno, name) for name in (
    "ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "EHOSTUNREACH", "EHOSTDOWN", "ENETUNREACH", "ENETDOWN",
    "ETIMEDOUT", "EPIPE") if hasattr(errno, name))
# Connection failures of the clients fsspec's back ends use, by class name: importing aiohttp, botocore or
# requests only to test against their classes would cost seconds where they are installed.
_CLIENT_CONNECTION_ERRORS = frozenset({
    "ClientConnectionError", "ClientConnectorError", "ServerDisconnectedError", "ServerTimeoutError",
    "ConnectionTimeoutError", "SocketTimeoutError",  # aiohttp
    "EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError",  # botocore (s3fs)
    "ConnectTimeout", "ReadTimeout",  # requests, httpx
})
# pip's names where the module a back end imports is named otherwise.
_PIP_NAMES = {"smbclient": "smbprotocol", "yarl": "aiohttp", "google": "gcsfs"}


def address(url: str) -> str:
    """The part of a URL that says where the store is: `ftp://127.0.0.1:1` of `ftp://127.0.0.1:1/x.zarr`."""
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0].rsplit("@", 1)[-1]  # credentials, if any, are not echoed
    return f"{scheme}://{host}" if host else f"{scheme}://"


def _causes(error: BaseException):
    """The error and what it was raised from or during, nearest first (a back end often wraps the socket's)."""
    seen = set()
    while error is not None and id(error) not in seen and len(seen) < 8:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def _is_connection_failure(error: BaseException) -> bool:
    if isinstance(error, (ConnectionError, TimeoutError)):
        return True
    if isinstance(error, OSError) and error.errno in _NETWORK_ERRNOS:
        return True
    import socket

    if isinstance(error, socket.gaierror):  # the host name does not resolve
        return True
    return any(cls.__name__ in _CLIENT_CONNECTION_ERRORS for cls in type(error).__mro__)


def _missing_module(error: BaseException) -> str | None:
    """The module whose absence an fsspec back end reported, where its ImportError says (ModuleNotFoundError.name)."""
    for cause in _causes(error):
        name = getattr(cause, "name", None)
        if isinstance(cause, ImportError) and name:
            top = name.split(".")[0]
            return _PIP_NAMES.get(top, top)
    return None


def store_failure(error: BaseException, url: str, where: str) -> BackendUnavailableError | None:
    """The exit-4 error for a store at `url` that cannot be reached or whose fsspec back end is missing;
    None where `error` is neither (the caller reports it as it would have)."""
    scheme = url.partition("://")[0]
    unknown = isinstance(error, ValueError) and str(error).startswith("Protocol not known")
    if unknown:
        return BackendUnavailableError(
            f"{where}: fsspec has no back end for {scheme}:// (is the scheme misspelt? otherwise install the "
            f"package that provides it; fsspec lists the ones it knows in fsspec.registry.known_implementations)")
    missing = next((cause for cause in _causes(error) if isinstance(cause, ImportError)), None)
    if missing is not None:
        module = _missing_module(missing)
        install = f"install it with pip install {module}" if module else "install the package it names"
        return BackendUnavailableError(f"{where}: {scheme}:// stores need fsspec's back end for {scheme}, whose "
                                       f"package is missing ({first_line(missing)}); {install}")
    for cause in _causes(error):
        if _is_connection_failure(cause):
            return BackendUnavailableError(
                f"{where}: cannot reach the store at {address(url)} ({type(cause).__name__}: {first_line(cause)}); "
                "check the address and that the server runs")
    return None
