"""A small blocking HTTP client: over ``wasi:http`` inside a component (a component has no
sockets), over ``urllib`` when the plugin runs natively (unit tests). :func:`session` is a
``requests.Session`` that sends through the same code (``orchard_sdk.requests_transport``).

Inside a component every request goes through the host's allow-list; a denied request raises
:class:`Denied`, an ``InvalidConfiguration`` (the admin must allow the host; retrying cannot
help). No response at all raises :class:`TransportError`, a ``Transient``.

    from orchard_sdk import http
    r = http.get(url, headers={"accept": "application/json"}, auth=(user, password))
    if r.status == 404:
        return None
    data = r.raise_for_status("get vhost").json()

    from orchard_sdk.requests_transport import session   # at module level: bundled
    s = session()                          # requests, over the same client
    r = s.get(url, auth=(user, password), timeout=10)
    data = http.check(r, "get vhost").json()
"""

from __future__ import annotations

import base64
import json as _json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import quote as _quote

from . import _warmup
from .errors import InvalidConfiguration, Transient, Unrecoverable

try:  # inside a component
    from componentize_py_types import Err as _Err
    from wit_world.imports import outgoing_handler as _handler
    from wit_world.imports import streams as _streams
    from wit_world.imports import wasi_http_types as _t
except ImportError:  # natively
    _handler = None

Headers = Union[Mapping[str, str], Sequence[Tuple[str, str]]]
#: ``(connect, read)`` in seconds, either ``None``: the host's own timeout then.
Timeouts = Tuple[Optional[float], Optional[float]]

#: What one ``blocking-write-and-flush`` accepts (wasi:io).
_WRITE_CHUNK = 4096
_READ_CHUNK = 64 * 1024


class Denied(InvalidConfiguration):
    """The host's allow-list refused the destination."""


class InvalidUrl(InvalidConfiguration):
    """The URL could not be understood."""


class TransportError(Transient):
    """Connecting, sending or receiving failed."""


def quote(segment: str) -> str:
    """One URL path segment, percent-encoded (``/`` too): ``quote("a/b") == "a%2Fb"``."""
    return _quote(segment, safe="")


def basic_auth(user: str, password: str) -> str:
    """The value of an ``authorization`` header for HTTP basic authentication."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return f"Basic {token}"


class Response:
    """A complete response."""

    def __init__(self, status: int, headers: List[Tuple[str, str]], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def ok(self) -> bool:
        """2xx."""
        return 200 <= self.status < 300

    def header(self, name: str) -> Optional[str]:
        """The first value of a header (case-insensitive)."""
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    def text(self) -> str:
        """The body as text (invalid UTF-8 replaced)."""
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON; a ``Transient`` failure when it is not JSON."""
        try:
            return _json.loads(self.body)
        except ValueError as e:
            raise Transient(f"response is not JSON: {e}: {self.text()[:200]!r}") from None

    def raise_for_status(self, what: str) -> "Response":
        """The response if 2xx, else a failure carrying status and body: 4xx other than 404,
        408, 409 and 429 are ``InvalidConfiguration`` (the request itself is wrong), the rest
        ``Transient``."""
        if self.ok:
            return self
        message = f"{what}: HTTP {self.status}: {self.text().strip()[:1000]}"
        if 400 <= self.status < 500 and self.status not in (404, 408, 409, 429):
            raise InvalidConfiguration(message)
        raise Transient(message)

    def __repr__(self) -> str:
        return f"Response(status={self.status}, body={self.body[:80]!r})"


def request(
    method: str,
    url: str,
    *,
    headers: Optional[Headers] = None,
    body: Optional[bytes] = None,
    json: Any = None,
    auth: Optional[Tuple[str, str]] = None,
) -> Response:
    """Sends a request and reads the whole response.

    ``json`` sets a JSON body and its content type; ``auth`` is ``(user, password)`` for basic
    authentication. Raises :class:`Denied`, :class:`InvalidUrl` or :class:`TransportError` when
    there is no response; any HTTP status is a :class:`Response`.
    """
    pairs: List[Tuple[str, str]] = list(
        headers.items() if isinstance(headers, Mapping) else (headers or [])
    )
    if json is not None:
        body = _json.dumps(json, separators=(",", ":")).encode()
        pairs.append(("content-type", "application/json"))
    if auth is not None:
        pairs.append(("authorization", basic_auth(*auth)))
    return send(method, url, pairs, body)


def send(
    method: str,
    url: str,
    headers: List[Tuple[str, str]],
    body: Optional[bytes] = None,
    timeout: Optional[Timeouts] = None,
) -> Response:
    """The one path every request takes (:func:`request` and the ``requests`` adapter): the
    headers as given, the body as bytes. ``timeout`` is ``(connect, read)`` in seconds; inside
    a component the host keeps the shorter of each and its own."""
    method = method.upper()
    if _warmup.active:
        raise TransportError(
            f"HTTP transport error: {method} {url}: no requests while the component is built"
        )
    if _handler is not None:
        return _send_wasi(method, url, headers, body, timeout)
    return _send_native(method, url, headers, body, timeout)


def session() -> Any:
    """A ``requests.Session`` whose ``http://`` and ``https://`` requests go through
    :func:`send`, so through the host's allow-list, timeouts and response size cap inside a
    component: :func:`orchard_sdk.requests_transport.session`.

    A component holds only the modules imported while it is built: import
    ``orchard_sdk.requests_transport`` at the top of the plugin (``requests`` with it), or this
    fails inside the component. A plugin that never imports it does not bundle ``requests``.
    """
    try:
        from . import requests_transport
    except ImportError as e:
        raise Unrecoverable(
            f"requests is not in this component ({e}): import orchard_sdk.requests_transport "
            "at module level, so that it is bundled when the component is built"
        ) from None
    return requests_transport.session()


def check(response: Any, what: str) -> Any:
    """:meth:`Response.raise_for_status` for a ``requests.Response``: the response if 2xx, else
    the same failure the SDK's own client raises for that status and body."""
    Response(response.status_code, [], response.content).raise_for_status(what)
    return response


def get(url: str, **kw: Any) -> Response:
    return request("GET", url, **kw)


def post(url: str, **kw: Any) -> Response:
    return request("POST", url, **kw)


def put(url: str, **kw: Any) -> Response:
    return request("PUT", url, **kw)


def patch(url: str, **kw: Any) -> Response:
    return request("PATCH", url, **kw)


def delete(url: str, **kw: Any) -> Response:
    return request("DELETE", url, **kw)


def split_url(url: str) -> Tuple[str, str, str]:
    """``(scheme, authority, path-with-query)`` of an ``http(s)://`` URL."""
    for scheme in ("http", "https"):
        prefix = scheme + "://"
        if url.startswith(prefix):
            rest = url[len(prefix):]
            i = rest.find("/")
            authority, path = (rest, "/") if i < 0 else (rest[:i], rest[i:])
            if not authority:
                break
            return scheme, authority, path
    raise InvalidUrl(f"invalid URL {url!r}")


# -- inside a component: wasi:http --------------------------------------------------------------


def _method(name: str) -> Any:
    known = {
        "GET": _t.Method_Get, "HEAD": _t.Method_Head, "POST": _t.Method_Post,
        "PUT": _t.Method_Put, "DELETE": _t.Method_Delete, "PATCH": _t.Method_Patch,
        "OPTIONS": _t.Method_Options,
    }
    return known[name]() if name in known else _t.Method_Other(name)


def _error_code(method: str, url: str, code: Any) -> Exception:
    if isinstance(code, _t.ErrorCode_HttpRequestDenied):
        return Denied(f"request to {url} denied by the host's allow-list")
    detail = type(code).__name__.replace("ErrorCode_", "")
    value = getattr(code, "value", None)
    if value is not None:
        detail += f"({value})"
    return TransportError(f"HTTP transport error: {method} {url}: {detail}")


def _options(timeout: Optional[Timeouts]) -> Any:
    """The request's wasi:http options: the connect timeout, and the read one for the first
    byte and between bytes (nanoseconds). ``None``: the host's own."""
    if timeout is None or (timeout[0] is None and timeout[1] is None):
        return None
    options = _t.RequestOptions()
    connect, read = timeout
    setters = [(options.set_connect_timeout, connect), (options.set_first_byte_timeout, read),
               (options.set_between_bytes_timeout, read)]
    for setter, seconds in setters:
        if seconds is not None:
            try:
                setter(max(1, int(seconds * 1_000_000_000)))
            except _Err:
                pass  # not supported by this host: its own timeout holds
    return options


def _send_wasi(
    method: str, url: str, pairs: List[Tuple[str, str]], body: Optional[bytes],
    timeout: Optional[Timeouts] = None,
) -> Response:
    scheme, authority, path = split_url(url)
    transport = lambda what: TransportError(f"HTTP transport error: {method} {url}: {what}")  # noqa: E731
    entries = [(k.lower(), v.encode()) for k, v in pairs]
    if body:
        entries.append(("content-length", str(len(body)).encode()))
    try:
        fields = _t.Fields.from_list(entries)
    except _Err as e:
        raise InvalidConfiguration(f"{method} {url}: invalid header: {e.value}") from None
    request = _t.OutgoingRequest(fields)
    try:
        request.set_method(_method(method))
        request.set_scheme(_t.Scheme_Https() if scheme == "https" else _t.Scheme_Http())
        request.set_authority(authority)
        request.set_path_with_query(path)
    except _Err:
        raise InvalidUrl(f"invalid URL {url!r}") from None
    outgoing = request.body()
    # Write and finish the body before handing the request over: the reliable order.
    if body:
        with outgoing.write() as stream:
            for i in range(0, len(body), _WRITE_CHUNK):
                try:
                    stream.blocking_write_and_flush(body[i:i + _WRITE_CHUNK])
                except _Err as e:
                    raise transport(f"writing body: {e.value}") from None
    try:
        _t.OutgoingBody.finish(outgoing, None)
    except _Err as e:
        raise transport(f"finishing body: {e.value}") from None
    try:
        future = _handler.handle(request, _options(timeout))
    except _Err as e:
        raise _error_code(method, url, e.value) from None
    with future:
        with future.subscribe() as pollable:
            pollable.block()
        outcome = future.get()
    if outcome is None:
        raise transport("no response")
    if isinstance(outcome, _Err):
        raise transport("response already taken")
    if isinstance(outcome.value, _Err):
        raise _error_code(method, url, outcome.value.value)
    with outcome.value.value as incoming:
        status = incoming.status()
        with incoming.headers() as fields:
            headers = [(k, v.decode("utf-8", errors="replace")) for k, v in fields.entries()]
        incoming_body = incoming.consume()
        chunks = []
        with incoming_body.stream() as stream:
            while True:
                try:
                    chunks.append(stream.blocking_read(_READ_CHUNK))
                except _Err as e:
                    if isinstance(e.value, _streams.StreamError_Closed):
                        break
                    raise transport(f"reading body: {e.value}") from None
        with _t.IncomingBody.finish(incoming_body):
            pass
    return Response(status, headers, b"".join(chunks))


# -- natively: urllib ---------------------------------------------------------------------------


def _send_native(
    method: str, url: str, pairs: List[Tuple[str, str]], body: Optional[bytes],
    timeout: Optional[Timeouts] = None,
) -> Response:
    import urllib.error
    import urllib.request

    # urllib has one timeout for connecting and each read: the shorter one asked, else 30 s.
    given = [t for t in (timeout or ()) if t is not None]
    seconds = min(given) if given else 30

    split_url(url)
    req = urllib.request.Request(url, data=body, method=method)
    for k, v in pairs:
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=seconds) as r:
            return Response(r.status, list(r.headers.items()), r.read())
    except urllib.error.HTTPError as e:
        return Response(e.code, list(e.headers.items()), e.read())
    except (urllib.error.URLError, OSError) as e:
        raise TransportError(f"HTTP transport error: {method} {url}: {e}") from None
