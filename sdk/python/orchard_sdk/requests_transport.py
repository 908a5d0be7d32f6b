"""``requests`` over the SDK's HTTP client: a transport adapter, so that ``requests`` — and any
client built on a ``requests.Session`` (generated API clients, vendor SDKs) — works inside a
component, where there are no sockets, and natively the same way.

    from orchard_sdk import http
    s = http.session()                       # a requests.Session, this adapter mounted
    r = s.get(f"{base}/api/vhosts/{http.quote(name)}", auth=(user, password), timeout=10)
    if r.status_code == 404:
        return None
    return http.check(r, f"get vhost {name}").json()

Every request goes through :func:`orchard_sdk.http.send`, the code of the SDK's own client, so
it keeps its rules:

- the host's allow-list: a denied request raises :class:`orchard_sdk.http.Denied` itself (an
  ``InvalidConfiguration``, "request to <url> denied by the host's allow-list") — not a
  ``requests`` exception, so that no ``except requests.RequestException`` in a library turns it
  into something retried; an unusable URL raises :class:`orchard_sdk.http.InvalidUrl`;
- no response at all (connection refused, a timeout, the response size cap of the host
  exceeded) raises :class:`TransportError`, which is both the SDK's ``TransportError`` (a
  ``Transient``) and a ``requests.ConnectionError``;
- ``timeout=`` (a number, or ``(connect, read)``) becomes the request's wasi:http options; the
  host keeps the shorter of each and its own, so it can only shorten them;
- every HTTP status is a response: ``http.check(r, what)`` raises the SDK's failure for it
  (``raise_for_status`` of ``requests`` raises ``HTTPError``, a plain ``Transient``).

What the host decides is not the caller's: hop-by-hop headers (``Connection``, ``Host``,
``Transfer-Encoding``…) are not sent, the length of the body is set by the SDK, TLS is the
host's (``verify`` and ``cert`` cannot change it: ``verify=False`` is ignored, a client
certificate is refused), proxies are not used. Redirects are followed by the session, each one
through the allow-list. The body is read whole before ``send`` returns (``stream=True`` streams
from memory); a compressed body is decoded as ``requests`` does.
"""

from __future__ import annotations

import io
from http.client import HTTPMessage, responses
from typing import Any, Callable, List, Optional, Tuple

import requests
from requests.adapters import BaseAdapter
from requests.cookies import extract_cookies_to_jar
from requests.structures import CaseInsensitiveDict
from requests.utils import get_encoding_from_headers
from urllib3 import HTTPResponse
from urllib3._collections import HTTPHeaderDict

from . import _warmup, http
from .errors import InvalidConfiguration

__all__ = ["WasiAdapter", "TransportError", "session", "warm_up"]

#: Headers the transport of ``requests`` manages itself and wasi:http refuses (or sets).
HOP_BY_HOP = frozenset(
    h.lower() for h in (
        "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "TE",
        "Trailer", "Host", "Content-Length", "Proxy-Authenticate", "Proxy-Authorization",
        "HTTP2-Settings",
    )
)


#: The headers the cookie jar reads (``http.cookiejar``).
_SET_COOKIE = frozenset(("set-cookie", "set-cookie2"))


class TransportError(http.TransportError, requests.exceptions.ConnectionError):
    """No response: the SDK's ``TransportError`` (``Transient``) that ``requests`` code also
    catches as a ``ConnectionError``."""


def _timeouts(timeout: Any) -> Optional[http.Timeouts]:
    if timeout is None:
        return None
    if isinstance(timeout, tuple):
        connect, read = timeout
        return connect, read
    connect_timeout = getattr(timeout, "connect_timeout", None)  # a urllib3 Timeout
    if connect_timeout is not None or hasattr(timeout, "read_timeout"):
        total = getattr(timeout, "total", None)
        pick = lambda t: t if isinstance(t, (int, float)) else total  # noqa: E731
        return pick(connect_timeout), pick(timeout.read_timeout)
    return float(timeout), float(timeout)


def _body(body: Any) -> Optional[bytes]:
    if body is None:
        return None
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    if hasattr(body, "read"):
        data = body.read()
        return data.encode("utf-8") if isinstance(data, str) else bytes(data)
    # An iterable of chunks (what requests sends chunked): whole, the length known.
    return b"".join(c.encode("utf-8") if isinstance(c, str) else bytes(c) for c in body)


class _Original:
    """What ``requests`` and urllib3 read of the ``http.client`` response behind a urllib3 one:
    the headers (for the cookie jar), and whether it is closed (it is: the body is in memory)."""

    def __init__(self, msg: HTTPMessage) -> None:
        self.msg = msg

    def isclosed(self) -> bool:
        return True

    def close(self) -> None:
        pass


class WasiAdapter(BaseAdapter):
    """A ``requests`` transport adapter sending each ``PreparedRequest`` through
    :func:`orchard_sdk.http.send`. Mount it on a session (:func:`session` does)."""

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: Any = None,
        verify: Any = True,
        cert: Any = None,
        proxies: Any = None,
    ) -> requests.Response:
        if cert:
            raise InvalidConfiguration(
                f"{request.method} {request.url}: client certificates are not supported (TLS is the host's)"
            )
        url = request.url or ""
        headers: List[Tuple[str, str]] = [
            (k, v if isinstance(v, str) else v.decode("latin-1"))
            for k, v in request.headers.items()
            if k.lower() not in HOP_BY_HOP
        ]
        send = http.send if _canned is None else _canned
        try:
            answer = send(request.method or "GET", url, headers, _body(request.body), _timeouts(timeout))
        except http.TransportError as e:
            if isinstance(e, TransportError):
                raise
            raise TransportError(e.message) from None
        response = self.build_response(request, answer)
        if not stream and "content-encoding" not in response.headers:
            # The body is already whole and as sent: ``content`` is it, not a copy joined from
            # urllib3's reads of it in 10 kB chunks (a compressed body still goes through them,
            # to be decoded as requests does; so does every body with ``stream=True``).
            response._content = answer.body
            response._content_consumed = True
        return response

    def build_response(self, request: requests.PreparedRequest, answer: http.Response) -> requests.Response:
        """What ``requests``' own adapter builds from a urllib3 response, from the SDK's."""
        raw = HTTPResponse(
            body=io.BytesIO(answer.body),
            headers=HTTPHeaderDict(answer.headers),
            status=answer.status,
            reason=responses.get(answer.status, ""),
            preload_content=False,
            decode_content=True,
            request_method=request.method,
            request_url=request.url,
        )
        # What the cookie jar reads the Set-Cookie headers from: none without them (then
        # neither this adapter nor the session looks for cookies in the answer).
        cookies = [(k, v) for k, v in answer.headers if k.lower() in _SET_COOKIE]
        if cookies:
            msg = HTTPMessage()
            for k, v in cookies:
                msg[k] = v
            raw._original_response = _Original(msg)  # type: ignore[attr-defined]
        response = requests.Response()
        response.status_code = answer.status
        response.headers = CaseInsensitiveDict(raw.headers)
        response.encoding = get_encoding_from_headers(response.headers)
        response.raw = raw
        response.reason = raw.reason
        response.url = request.url or ""
        if cookies:
            extract_cookies_to_jar(response.cookies, request, raw)
        response.request = request
        response.connection = self
        return response

    def close(self) -> None:
        pass


def session() -> requests.Session:
    """A ``requests.Session`` with :class:`WasiAdapter` mounted for ``http://`` and
    ``https://``, sending no ``Accept-Encoding`` of its own (as the SDK's client; a compressed
    answer to one set by the caller is decoded)."""
    s = requests.Session()
    adapter = WasiAdapter()
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    s.headers.pop("Accept-Encoding", None)
    # Natively too, nothing from the environment: no proxies, no .netrc, no REQUESTS_CA_BUNDLE.
    s.trust_env = False
    return s


# -- the warm-up while the component is built -------------------------------------------------

#: What :class:`WasiAdapter` sends through instead of :func:`orchard_sdk.http.send`: ``None``,
#: but :func:`_canned_answer` while :func:`warm_up` runs.
_canned: Optional[Callable[..., http.Response]] = None

#: The requests of :func:`warm_up`: the shapes of a plugin's calls (a JSON GET, a missing one, a
#: PUT and a POST with JSON bodies, a DELETE), to a host of the reserved ``.invalid`` domain.
_WARM_UP_REQUESTS: Tuple[Tuple[str, str, Any], ...] = (
    ("GET", "http://warm-up.invalid:15672/api/things/a%2Fb", None),
    ("GET", "http://warm-up.invalid:15672/api/things/missing?x=1", None),
    ("PUT", "http://warm-up.invalid:15672/api/things/a%2Fb", {"description": "d", "tags": "a,b", "on": False}),
    ("POST", "https://warm-up.invalid/api/things", {"value": 1, "arguments": {}}),
    ("DELETE", "http://warm-up.invalid:15672/api/things/a%2Fb", None),
)


def _canned_answer(
    method: str, url: str, headers: List[Tuple[str, str]], body: Optional[bytes] = None,
    timeout: Any = None,
) -> http.Response:
    """The answer to a request of :func:`warm_up`, in memory: what a JSON API answers (a JSON
    document, a JSON ``404``, an empty ``201``/``204``). Outside the warm-up, the
    ``TransportError`` of a component being built: it never answers a real call."""
    if not _warmup.active:
        raise TransportError(f"HTTP transport error: {method} {url}: the warm-up's answer outside the warm-up")
    if method == "GET":
        missing = "/missing" in url
        data = b'{"error":"Object Not Found","reason":"Not Found"}' if missing else \
            b'{"name":"a/b","description":"d","tags":["a","b"],"on":false,"n":1,"limits":[{"value":{}}]}'
        return http.Response(404 if missing else 200, [
            ("content-type", "application/json"), ("content-length", str(len(data))),
            ("vary", "accept, accept-encoding, origin"), ("cache-control", "no-cache"),
        ], data)
    return http.Response(201 if method in ("PUT", "POST") else 204, [("content-length", "0")], b"")


def warm_up(rounds: int) -> None:
    """Sends the requests of a plugin's calls through the whole of ``requests`` ``rounds`` times,
    each answered in memory by :func:`_canned_answer` instead of :func:`orchard_sdk.http.send`,
    so that the component's snapshot holds what their first run makes: lazy imports, the
    caches of ``requests`` and urllib3 (``isinstance`` checks against ``requests``' protocols,
    compiled patterns…) and specialised bytecode. Runs only while the component is built
    (:mod:`orchard_sdk._warmup`, which :func:`orchard_sdk.export` calls it from); the adapter
    sends through :func:`orchard_sdk.http.send` again when it returns, whatever happened."""
    global _canned
    if not _warmup.active:
        raise RuntimeError("requests_transport.warm_up runs only while the component is built")
    _canned = _canned_answer
    try:
        for _ in range(rounds):
            s = session()
            s.auth = ("warm-up", "warm-up")
            for method, url, body in _WARM_UP_REQUESTS:
                try:
                    r = s.request(method, url, json=body, timeout=10 if body else None)
                    if r.status_code != 404:
                        http.check(r, "warm-up")
                    if r.content:
                        r.json()
                    r.close()
                except Exception:  # noqa: BLE001 - only warms: nothing of it is kept
                    pass
            s.close()
    finally:
        _canned = None
