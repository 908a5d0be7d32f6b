"""The kopf contender of the throughput bench: the same PowerDNS job as Orchard's `pdns-zone`
plugin, on the same CRD (`DnsZone.pdns.orchard.dev`), written the way a kopf user would.

- on create: read the credentials Secret named in `spec.credentialsRef`, POST the zone to
  PowerDNS (a 409 "already exists" counts as adopted), set `status.id` and the `Available` /
  `Progressing` conditions;
- on delete (kopf's finalizer): read the Secret, DELETE the zone (404 is fine).

kopf's defaults otherwise (its own finalizer and progress storage). At its defaults kopf 1.45
posts no Events of its own (`settings.posting.loggers` is False: only explicit `kopf.event()`
calls are posted); with `ORCHARD_BENCH_KOPF_EVENTS=1` (the harness's `kopf-events` contender)
its handlers' log lines are posted as Events too ("Handler 'create_zone' succeeded.", "Creation
is processed: ..."), which is what Orchard's default `--events normal` compares with. Run with
`kopf run --standalone --namespace NS bench/kopf/operator.py`. PowerDNS 5xx and connection errors
are `kopf.TemporaryError(delay=1)` (kopf's default retry for an arbitrary exception is 60 s), and
every such retry prints one `bench-transient` line, every PowerDNS call one `bench-call` line:
the harness counts them in this process's log.
"""

import base64
import datetime
import json
import os
import sys
import urllib.error
import urllib.request

import kopf
import kubernetes

GROUP, VERSION, PLURAL = "pdns.orchard.dev", "v1alpha1", "dnszones"

_core = None


def core():
    global _core
    if _core is None:
        kubernetes.config.load_kube_config()
        _core = kubernetes.client.CoreV1Api()
    return _core


def credentials(namespace, spec):
    name = spec["credentialsRef"]["secretName"]
    secret = core().read_namespaced_secret(name, namespace)
    data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
    return data["url"].rstrip("/"), data["apiKey"], data.get("serverId", "localhost")


def pdns(method, url, key, body=None):
    print(f"bench-call {method}", file=sys.stderr, flush=True)
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("X-API-Key", key)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read()
    except OSError as e:
        print(f"bench-transient {method} {e}", file=sys.stderr, flush=True)
        raise kopf.TemporaryError(f"PowerDNS {method}: {e}", delay=1)
    if status >= 500:
        print(f"bench-transient {method} {status}", file=sys.stderr, flush=True)
        raise kopf.TemporaryError(f"PowerDNS {method}: {status} {text[:200]!r}", delay=1)
    return status, text


def canonical(name):
    return name if name.endswith(".") else name + "."


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@kopf.on.startup()
def configure(settings, **_):
    if os.environ.get("ORCHARD_BENCH_KOPF_EVENTS") == "1":
        settings.posting.loggers = True


@kopf.on.create(GROUP, VERSION, PLURAL)
def create_zone(spec, meta, namespace, patch, **_):
    url, key, server = credentials(namespace, spec)
    res = spec["resource"]
    zone = canonical(res["name"])
    body = {
        "name": zone,
        "kind": res.get("kind", "Native"),
        "nameservers": res.get("nameservers", []),
        "account": res.get("account", ""),
    }
    status, text = pdns("POST", f"{url}/api/v1/servers/{server}/zones", key, body)
    if status not in (201, 409):
        raise kopf.PermanentError(f"PowerDNS POST: {status} {text[:200]!r}")
    generation = meta.get("generation")
    at = now()
    patch.status["id"] = zone
    patch.status["conditions"] = [
        {"type": "Available", "status": "True", "reason": "Success", "message": "",
         "lastTransitionTime": at, "observedGeneration": generation},
        {"type": "Progressing", "status": "False", "reason": "Success", "message": "",
         "lastTransitionTime": at, "observedGeneration": generation},
    ]


@kopf.on.delete(GROUP, VERSION, PLURAL)
def delete_zone(spec, namespace, **_):
    url, key, server = credentials(namespace, spec)
    zone = canonical(spec["resource"]["name"])
    status, text = pdns("DELETE", f"{url}/api/v1/servers/{server}/zones/{zone}", key)
    if status not in (204, 404):
        raise kopf.TemporaryError(f"PowerDNS DELETE: {status} {text[:200]!r}", delay=1)
