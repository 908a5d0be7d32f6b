"""The hook server of the metacontroller contenders of the throughput bench (issue 25): the same
PowerDNS job as bench/kopf/operator.py (and Orchard's `pdns-zone` plugin), behind a
DecoratorController over `DnsZone.pdns.orchard.dev` (bench/metacontroller/decorator.json).

    python3 bench/metacontroller/hooks.py PORT      # serves on 127.0.0.1:PORT

Python's standard library only: `http.server.ThreadingHTTPServer` (a thread per connection,
HTTP/1.1 keep-alive, so metacontroller's pooled connections each keep their thread), and one
keep-alive `http.client.HTTPConnection` to PowerDNS per thread.

- /customize: asks metacontroller for the credentials Secret named in `spec.credentialsRef` as a
  related object (metacontroller watches Secrets and caches this answer per object generation):
  no Secret GET from here, ever.
- /sync: a DnsZone without `status.id`: POST the zone to PowerDNS (409 "already exists" counts
  as adopted) and answer `status.id` with the `Available` / `Progressing` conditions. A zone
  whose status already says so is answered as it is, with no PowerDNS call (metacontroller calls
  sync again after its own finalizer update: the hook is level-triggered and idempotent).
- /finalize (the object is being deleted): DELETE the zone (404 is fine), `finalized: true`;
  metacontroller then removes its finalizer.

PowerDNS 5xx and connection errors answer 500: metacontroller retries the object with its
rate-limited backoff. Every such error prints one `bench-transient` line, every PowerDNS call one
`bench-call` line, to stderr: the harness counts them in the contender's log.
"""

import base64
import datetime
import http.client
import json
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_local = threading.local()


class Transient(Exception):
    pass


def log(line):
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def pdns(method, url, key, body=None):
    """One PowerDNS call over this thread's keep-alive connection (reopened once if stale)."""
    log(f"bench-call {method}")
    u = urllib.parse.urlsplit(url)
    path = u.path + (f"?{u.query}" if u.query else "")
    data = json.dumps(body).encode() if body is not None else None
    headers = {"X-API-Key": key}
    if data is not None:
        headers["Content-Type"] = "application/json"
    for attempt in (0, 1):
        conn = getattr(_local, "conn", None)
        if conn is None or getattr(_local, "netloc", None) != u.netloc:
            conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=10)
            _local.conn, _local.netloc = conn, u.netloc
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            status, text = resp.status, resp.read()
            break
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            _local.conn = None
            if attempt == 1:
                log(f"bench-transient {method} {e}")
                raise Transient(f"PowerDNS {method}: {e}")
    if status >= 500:
        log(f"bench-transient {method} {status}")
        raise Transient(f"PowerDNS {method}: {status} {text[:200]!r}")
    return status, text


def canonical(name):
    return name if name.endswith(".") else name + "."


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def credentials(req):
    obj = req["object"]
    ns = obj["metadata"].get("namespace", "")
    name = obj["spec"]["credentialsRef"]["secretName"]
    # related: {"Secret.v1": {"<name>" or "<namespace>/<name>": Secret}}
    for group in (req.get("related") or {}).values():
        for secret in group.values():
            meta = secret.get("metadata", {})
            if meta.get("name") == name and meta.get("namespace", ns) == ns:
                data = {k: base64.b64decode(v).decode()
                        for k, v in (secret.get("data") or {}).items()}
                return data["url"].rstrip("/"), data["apiKey"], data.get("serverId", "localhost")
    raise Transient(f"Secret {ns}/{name} not among the related objects yet")


def customize(req):
    obj = req["parent"]
    return {"relatedResources": [{
        "apiVersion": "v1",
        "resource": "secrets",
        "namespace": obj["metadata"].get("namespace", ""),
        "names": [obj["spec"]["credentialsRef"]["secretName"]],
    }]}


def available(status, zone):
    return status.get("id") == zone and any(
        c.get("type") == "Available" and c.get("status") == "True"
        for c in status.get("conditions") or [])


def sync(req):
    obj = req["object"]
    spec, status = obj["spec"], obj.get("status") or {}
    res = spec["resource"]
    zone = canonical(res["name"])
    if available(status, zone):
        return {"status": status}
    url, key, server = credentials(req)
    body = {
        "name": zone,
        "kind": res.get("kind", "Native"),
        "nameservers": res.get("nameservers", []),
        "account": res.get("account", ""),
    }
    code, text = pdns("POST", f"{url}/api/v1/servers/{server}/zones", key, body)
    generation = obj["metadata"].get("generation")
    at = now()
    if code not in (201, 409):
        # Terminal, as the kopf contender's PermanentError: say so and do not retry.
        return {"status": {"conditions": [
            {"type": "Available", "status": "False", "reason": "InvalidConfiguration",
             "message": f"PowerDNS POST: {code} {text[:200]!r}", "lastTransitionTime": at,
             "observedGeneration": generation}]}}
    return {"status": {
        "id": zone,
        "conditions": [
            {"type": "Available", "status": "True", "reason": "Success", "message": "",
             "lastTransitionTime": at, "observedGeneration": generation},
            {"type": "Progressing", "status": "False", "reason": "Success", "message": "",
             "lastTransitionTime": at, "observedGeneration": generation},
        ],
    }}


def finalize(req):
    obj = req["object"]
    url, key, server = credentials(req)
    zone = canonical(obj["spec"]["resource"]["name"])
    code, text = pdns("DELETE", f"{url}/api/v1/servers/{server}/zones/{zone}", key)
    if code not in (204, 404):
        raise Transient(f"PowerDNS DELETE: {code} {text[:200]!r}")
    return {"status": obj.get("status") or {}, "finalized": True}


ROUTES = {"/customize": customize, "/sync": sync, "/finalize": finalize}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_):  # no access log
        pass

    def answer(self, code, payload):
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/healthz":
            self.answer(200, {"ok": True})
        else:
            self.answer(404, {})

    def do_POST(self):
        route = ROUTES.get(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if route is None:
            self.answer(404, {})
            return
        try:
            self.answer(200, route(json.loads(body)))
        except Transient as e:
            self.answer(500, {"error": str(e)})
        except Exception as e:  # a bug: say it, and let metacontroller retry
            log(f"hook error {self.path}: {e!r}")
            self.answer(500, {"error": repr(e)})


def main():
    port = int(sys.argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    log(f"hooks: serving on 127.0.0.1:{port}")
    server.serve_forever()


if __name__ == "__main__":
    main()
