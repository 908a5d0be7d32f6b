"""Unit tests of ``requests`` over the SDK's client (``orchard_sdk.requests_transport``),
natively: the adapter maps a ``PreparedRequest`` to ``orchard_sdk.http.send`` and its answer
back; through a fake of the component's wasi:http bindings, a host the allow-list refuses
fails through a standard ``requests`` session exactly as through the SDK's own client."""

from __future__ import annotations

import gzip
import json
import os
import sys
import unittest
from contextlib import contextmanager
from typing import Any, List, Optional, Tuple
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

# The pinned requests of sdk/python/requirements.txt: tests/run.sh runs these tests with the
# SDK's venv (sdk/install-tools.sh installs the file there), so a missing one is an error here,
# not a skip.
import requests  # noqa: E402

from orchard_sdk import Actuator, InvalidConfiguration, Object, Raw, Resource, Transient, http  # noqa: E402
from orchard_sdk import requests_transport  # noqa: E402


class Sent:
    """Records what reaches ``http.send`` and answers ``answer``."""

    def __init__(self, *answers: http.Response) -> None:
        self.calls: List[Tuple[str, str, List[Tuple[str, str]], Optional[bytes], Any]] = []
        self.answers = list(answers)

    def __call__(self, method, url, headers, body=None, timeout=None) -> http.Response:
        self.calls.append((method, url, headers, body, timeout))
        return self.answers.pop(0)

    def headers(self, i: int = 0) -> dict:
        return {k.lower(): v for k, v in self.calls[i][2]}


class AdapterTest(unittest.TestCase):
    def send(self, *answers: http.Response) -> Sent:
        sent = Sent(*answers)
        patcher = mock.patch.object(http, "send", sent)
        patcher.start()
        self.addCleanup(patcher.stop)
        return sent

    def test_a_request_reaches_the_sdk_client_and_its_answer_comes_back(self):
        sent = self.send(http.Response(
            201, [("Content-Type", "application/json; charset=utf-8"), ("X-Id", "7")], b'{"ok": true}',
        ))
        r = http.session().put(
            "http://rabbit:15672/api/vhosts/a%2Fb?x=1", json={"tracing": False},
            auth=("guest", "s3cret"), headers={"X-Trace": "t"}, timeout=(2, 5),
        )
        method, url, _, body, timeout = sent.calls[0]
        self.assertEqual((method, url), ("PUT", "http://rabbit:15672/api/vhosts/a%2Fb?x=1"))
        self.assertEqual(json.loads(body), {"tracing": False})
        self.assertEqual(timeout, (2, 5))
        h = sent.headers()
        self.assertEqual(h["authorization"], http.basic_auth("guest", "s3cret"))
        self.assertEqual(h["content-type"], "application/json")
        self.assertEqual(h["x-trace"], "t")
        for hop in ("connection", "content-length", "host", "accept-encoding"):
            self.assertNotIn(hop, h)
        self.assertEqual((r.status_code, r.ok, r.reason), (201, True, "Created"))
        self.assertEqual(r.headers["x-id"], "7")
        self.assertEqual(r.json(), {"ok": True})
        self.assertEqual(r.encoding, "utf-8")
        self.assertEqual(r.url, "http://rabbit:15672/api/vhosts/a%2Fb?x=1")
        self.assertIs(http.check(r, "put vhost"), r)

    def test_a_single_timeout_is_both_and_none_is_the_hosts(self):
        sent = self.send(http.Response(204, [], b""), http.Response(204, [], b""))
        s = http.session()
        s.delete("http://h/a", timeout=3)
        s.get("http://h/b")
        self.assertEqual([c[4] for c in sent.calls], [(3.0, 3.0), None])
        self.assertIsNone(sent.calls[1][3])

    def test_statuses_are_responses_and_check_raises_the_sdks_failures(self):
        self.send(http.Response(404, [], b"Not Found"), http.Response(400, [], b" bad "),
                  http.Response(503, [], b"later"))
        s = http.session()
        self.assertEqual(s.get("http://h/q").status_code, 404)
        with self.assertRaises(InvalidConfiguration) as bad:
            http.check(s.get("http://h/q"), "get queue q")
        self.assertEqual(bad.exception, InvalidConfiguration("get queue q: HTTP 400: bad"))
        with self.assertRaises(Transient) as later:
            http.check(s.get("http://h/q"), "get queue q")
        self.assertEqual(later.exception, Transient("get queue q: HTTP 503: later"))

    def test_a_compressed_body_and_cookies_are_handled_as_requests_does(self):
        sent = self.send(
            http.Response(200, [("Content-Encoding", "gzip"), ("Set-Cookie", "sid=1; Path=/")],
                          gzip.compress(b"[1, 2]")),
            http.Response(200, [], b"[]"),
        )
        s = http.session()
        self.assertEqual(s.get("http://h/a", headers={"Accept-Encoding": "gzip"}).json(), [1, 2])
        self.assertEqual(s.cookies.get("sid"), "1")
        s.get("http://h/b")
        self.assertEqual(sent.headers(1)["cookie"], "sid=1")

    def test_a_body_is_the_content_as_answered_and_streams_when_asked(self):
        body = b'{"name": "orders"}'
        self.send(http.Response(200, [("Content-Type", "application/json")], body),
                  http.Response(200, [("Content-Type", "application/json")], body))
        s = http.session()
        self.assertIs(s.get("http://h/a").content, body)
        r = s.get("http://h/a", stream=True)
        self.assertEqual(b"".join(r.iter_content(5)), body)
        self.assertEqual(len(s.cookies), 0)

    def test_redirects_are_followed_each_through_the_client(self):
        sent = self.send(http.Response(302, [("Location", "/api/b")], b""), http.Response(200, [], b"ok"))
        r = http.session().get("http://h/api/a")
        self.assertEqual([c[1] for c in sent.calls], ["http://h/api/a", "http://h/api/b"])
        self.assertEqual((r.text, [h.status_code for h in r.history]), ("ok", [302]))

    def test_no_response_is_the_sdks_transient_and_a_requests_connection_error(self):
        with self.assertRaises(requests.ConnectionError) as raised:
            http.session().get("http://127.0.0.1:1/")
        self.assertIsInstance(raised.exception, http.TransportError)
        self.assertEqual(raised.exception.kind, "transient")
        self.assertTrue(raised.exception.message.startswith("HTTP transport error: GET http://127.0.0.1:1/:"))

    def test_a_client_certificate_is_refused(self):
        self.send()
        with self.assertRaises(InvalidConfiguration):
            http.session().get("https://h/", cert="/client.pem")


class WarmUpTest(unittest.TestCase):
    """The build-time warm-up (``requests_transport.warm_up``): requests answered in memory, and
    only then."""

    def setUp(self) -> None:
        self.sent = Sent(http.Response(200, [], b"{}"))
        patcher = mock.patch.object(http, "send", self.sent)
        patcher.start()
        self.addCleanup(patcher.stop)

    def test_the_warm_up_runs_requests_whole_stack_without_reaching_the_sdk_client(self):
        from orchard_sdk import _warmup

        answered = []
        canned = requests_transport._canned_answer
        with mock.patch.object(requests_transport, "_canned_answer",
                               lambda *a, **k: answered.append(a[:2]) or canned(*a, **k)):
            with _warmup.running():
                requests_transport.warm_up(2)
        self.assertEqual(len(answered), 2 * len(requests_transport._WARM_UP_REQUESTS))
        self.assertEqual({m for m, _ in answered}, {"GET", "PUT", "POST", "DELETE"})
        self.assertEqual(self.sent.calls, [])

    def test_after_the_warm_up_a_request_goes_to_the_real_transport(self):
        from orchard_sdk import _warmup

        with _warmup.running():
            requests_transport.warm_up(1)
        r = http.session().get("http://rabbit:15672/api/vhosts/a")
        self.assertEqual([c[:2] for c in self.sent.calls], [("GET", "http://rabbit:15672/api/vhosts/a")])
        self.assertEqual(r.json(), {})

    def test_a_warm_up_that_fails_still_restores_the_real_transport(self):
        from orchard_sdk import _warmup

        with mock.patch.object(requests_transport, "session", side_effect=RuntimeError("boom")):
            with _warmup.running(), self.assertRaises(RuntimeError):
                requests_transport.warm_up(1)
        http.session().get("http://h/a")
        self.assertEqual(len(self.sent.calls), 1)

    def test_the_warm_up_and_its_answers_refuse_to_run_outside_a_build(self):
        with self.assertRaises(RuntimeError):
            requests_transport.warm_up(1)
        with self.assertRaises(requests_transport.TransportError):
            requests_transport._canned_answer("GET", "http://h/a", [])
        self.assertIsNone(requests_transport._canned)


# -- a fake of the component's wasi:http bindings (what componentize-py generates) -------------


class Err(Exception):
    def __init__(self, value: Any) -> None:
        super().__init__(value)
        self.value = value


class Ok:
    def __init__(self, value: Any) -> None:
        self.value = value


class Resourceful:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class FakeWasi:
    """The bindings ``orchard_sdk.http`` uses; ``allowed`` is the host's allow-list (authorities),
    every allowed request is answered ``answer``."""

    class Method:
        def __init__(self, value: Any = None) -> None:
            self.value = value

    class ErrorCode_HttpRequestDenied:
        pass

    class StreamError_Closed:
        pass

    def __init__(self, allowed: List[str], answer: Tuple[int, List[Tuple[str, bytes]], bytes]) -> None:
        self.allowed, self.answer, self.sent = allowed, answer, []
        wasi = self

        for name in ("Get", "Head", "Post", "Put", "Delete", "Patch", "Options", "Other"):
            setattr(self, f"Method_{name}", type(f"Method_{name}", (FakeWasi.Method,), {}))
        self.Scheme_Http = type("Scheme_Http", (), {})
        self.Scheme_Https = type("Scheme_Https", (), {})

        class Fields(Resourceful):
            def __init__(self, entries):
                self.list = entries

            @staticmethod
            def from_list(entries):
                if any(k in ("connection", "host", "transfer-encoding") for k, _ in entries):
                    raise Err("forbidden")
                return Fields(entries)

            def entries(self):
                return self.list

        class Stream(Resourceful):
            def __init__(self, data=b""):
                self.data = bytearray(data)

            def blocking_write_and_flush(self, chunk):
                self.data += chunk

            def blocking_read(self, n):
                if not self.data:
                    raise Err(FakeWasi.StreamError_Closed())
                chunk, self.data[:] = bytes(self.data[:n]), self.data[n:]
                return chunk

        class OutgoingBody:
            def __init__(self):
                self.stream = Stream()

            def write(self):
                return self.stream

            @staticmethod
            def finish(body, trailers):
                pass

        class OutgoingRequest:
            def __init__(self, fields):
                self.fields, self.outgoing = fields, OutgoingBody()

            def set_method(self, m):
                self.method = m

            def set_scheme(self, s):
                self.scheme = s

            def set_authority(self, a):
                self.authority = a

            def set_path_with_query(self, p):
                self.path = p

            def body(self):
                return self.outgoing

        class RequestOptions:
            def __init__(self):
                self.timeouts = {}

            def set_connect_timeout(self, ns):
                self.timeouts["connect"] = ns

            def set_first_byte_timeout(self, ns):
                self.timeouts["first-byte"] = ns

            def set_between_bytes_timeout(self, ns):
                self.timeouts["between-bytes"] = ns

        class IncomingBody(Resourceful):
            def __init__(self, data):
                self.data = data

            def stream(self):
                return Stream(self.data)

            @staticmethod
            def finish(body):
                return Resourceful()

        class IncomingResponse(Resourceful):
            def __init__(self, status, headers, body):
                self.s, self.h, self.b = status, headers, body

            def status(self):
                return self.s

            def headers(self):
                return Fields(self.h)

            def consume(self):
                return IncomingBody(self.b)

        class Future(Resourceful):
            def __init__(self, response):
                self.response = response

            def subscribe(self):
                pollable = Resourceful()
                pollable.block = lambda: None
                return pollable

            def get(self):
                return Ok(Ok(self.response))

        class Handler:
            @staticmethod
            def handle(request, options):
                wasi.sent.append((request, options))
                if request.authority not in wasi.allowed:
                    raise Err(FakeWasi.ErrorCode_HttpRequestDenied())
                return Future(IncomingResponse(*wasi.answer))

        self.Fields, self.OutgoingRequest, self.OutgoingBody = Fields, OutgoingRequest, OutgoingBody
        self.RequestOptions, self.IncomingBody, self.handler = RequestOptions, IncomingBody, Handler

    @contextmanager
    def installed(self):
        streams = type("streams", (), {"StreamError_Closed": FakeWasi.StreamError_Closed})
        with mock.patch.multiple(http, create=True, _handler=self.handler, _t=self, _Err=Err, _streams=streams):
            yield


class Probe(Actuator):
    """``create`` fetches ``spec.url`` with a ``requests`` session or with the SDK's client."""

    def describe(self):  # pragma: no cover - not called
        raise NotImplementedError

    def create(self, obj):
        url = obj.spec["url"]
        if obj.spec["via"] == "requests":
            return Resource("x", http.check(http.session().get(url), "get").json())
        return Resource("x", http.get(url).raise_for_status("get").json())


class InsideAComponentTest(unittest.TestCase):
    def test_a_denied_host_fails_through_requests_exactly_as_through_the_sdk_client(self):
        wasi = FakeWasi(allowed=["rabbit:15672"], answer=(200, [], b"{}"))
        url = "http://elsewhere:80/api/vhosts"
        with wasi.installed():
            with self.assertRaises(http.Denied) as own:
                http.get(url)
            with self.assertRaises(http.Denied) as through_requests:
                http.session().get(url)
            raw = Raw(Probe())
            own_failure = raw.create(Object("p", spec={"url": url, "via": "sdk"})).failure
            requests_failure = raw.create(Object("p", spec={"url": url, "via": "requests"})).failure
        self.assertIs(type(through_requests.exception), http.Denied)
        self.assertEqual(through_requests.exception, own.exception)
        self.assertEqual(own.exception, http.Denied(f"request to {url} denied by the host's allow-list"))
        # Through the contract: the same failure, kind and message.
        self.assertEqual(requests_failure, own_failure)
        self.assertEqual(requests_failure.kind, "invalid-configuration")
        self.assertEqual([r.authority for r, _ in wasi.sent], ["elsewhere:80"] * 4)

    def test_an_allowed_request_goes_over_wasi_http_with_its_timeouts(self):
        wasi = FakeWasi(allowed=["rabbit:15672"],
                        answer=(200, [("content-type", b"application/json")], b'{"name": "a"}'))
        with wasi.installed():
            r = http.session().post("http://rabbit:15672/api/x?y=1", data=b"abc", timeout=(1.5, 4))
        self.assertEqual(r.json(), {"name": "a"})
        request, options = wasi.sent[0]
        self.assertIsInstance(request.method, wasi.Method_Post)
        self.assertEqual((request.authority, request.path), ("rabbit:15672", "/api/x?y=1"))
        self.assertIsInstance(request.scheme, wasi.Scheme_Http)
        self.assertEqual(bytes(request.outgoing.stream.data), b"abc")
        names = [k for k, _ in request.fields.list]
        self.assertEqual(names.count("content-length"), 1)
        self.assertNotIn("connection", names)
        self.assertEqual(options.timeouts, {
            "connect": 1_500_000_000, "first-byte": 4_000_000_000, "between-bytes": 4_000_000_000,
        })
        with wasi.installed():
            http.get("http://rabbit:15672/api/x")
        self.assertIsNone(wasi.sent[1][1])  # the SDK's own client: the host's timeouts


if __name__ == "__main__":
    unittest.main()
