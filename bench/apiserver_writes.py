"""What one write costs the kube-apiserver: server-side apply against a JSON merge patch, for
the three writes an operator makes on a DnsZone (the finalizer, the status, the finalizer's
release), on two halves of N objects, alternating, twice (docs/benchmarks.md, "Session 11").
The apiserver's and etcd's CPU come from /proc, as the throughput harness reads them.

usage: bench/apiserver_writes.py <testenv-dir> <crd.json> <n> [namespace]

  <crd.json>: the DnsZone CRD as JSON, e.g.
    orchard crd pdns_zone.wasm | kubectl create --dry-run=client -o json -f - > crd.json
The test environment must be up (tests/env/testenv.sh up); nothing else should run beside it.
"""
import json, os, ssl, sys, time, http.client, threading, queue

env_dir, crd_file, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
internal = dict(l.strip().split("=", 1) for l in open(f"{env_dir}/internal.env") if "=" in l)
port = int(internal["APISERVER_PORT"])
pid = int(open(f"{env_dir}/pids/kube-apiserver.pid").read().split()[0])
etcd_pid = int(open(f"{env_dir}/pids/etcd.pid").read().split()[0])
ctx = ssl.create_default_context(cafile=f"{env_dir}/pki/ca.crt")
ctx.load_cert_chain(f"{env_dir}/pki/admin.crt", f"{env_dir}/pki/admin.key")
tick = os.sysconf("SC_CLK_TCK")

def cpu(p):
    f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick

local = threading.local()
def conn():
    c = getattr(local, "c", None)
    if c is None:
        c = local.c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)
    return c

def req(method, path, body=None, ctype="application/json"):
    c = conn()
    c.request(method, path, body=None if body is None else json.dumps(body), headers={"Content-Type": ctype})
    r = c.getresponse(); data = r.read()
    if r.status >= 300:
        raise RuntimeError(f"{method} {path}: {r.status} {data[:300]}")
    return data

NS = sys.argv[4] if len(sys.argv) > 4 else "ssa-exp"
crd = json.load(open(crd_file))
G, V, P = crd["spec"]["group"], crd["spec"]["versions"][0]["name"], crd["spec"]["names"]["plural"]
try: req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
except RuntimeError as e:
    if "409" not in str(e): raise
try: req("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
except RuntimeError as e:
    if "409" not in str(e): raise
time.sleep(3)
base = f"/apis/{G}/{V}/namespaces/{NS}/{P}"

def parallel(fn, items, threads=8):
    q = queue.Queue()
    for i in items: q.put(i)
    errs = []
    def work():
        while True:
            try: i = q.get_nowait()
            except queue.Empty: return
            try: fn(i)
            except Exception as e: errs.append(e)
    ts = [threading.Thread(target=work) for _ in range(threads)]
    [t.start() for t in ts]; [t.join() for t in ts]
    if errs: raise errs[0]

def measure(label, fn, items):
    a, e, t = cpu(pid), cpu(etcd_pid), time.time()
    parallel(fn, items)
    da, de, dt = cpu(pid) - a, cpu(etcd_pid) - e, time.time() - t
    print(f"{label:40s} apiserver {1000*da/len(items):6.2f} ms/req  etcd {1000*de/len(items):5.2f}  wall {dt:5.2f} s", flush=True)

names = [f"z{i}" for i in range(n)]
measure("create (POST)", lambda i: req("POST", base, {"apiVersion": f"{G}/{V}", "kind": crd["spec"]["names"]["kind"], "metadata": {"name": i}, "spec": {"credentialsRef": {"secretName": "pdns"}, "resource": {"name": f"{i}.example."}}}), names)
half_a, half_b = names[: n // 2], names[n // 2 :]
status = lambda i, gen: {"id": f"{i}.example.", "lastSyncTime": f"2026-12-02T10:00:{gen:02d}Z",
    "conditions": [{"type": "Available", "status": "True", "reason": "Success", "message": "zone serves", "observedGeneration": 1, "lastTransitionTime": f"2026-12-02T10:00:{gen:02d}Z"},
                   {"type": "Progressing", "status": "False", "reason": "Success", "message": "up to date", "observedGeneration": 1, "lastTransitionTime": f"2026-12-02T10:00:{gen:02d}Z"}],
    "resource": {"name": f"{i}.example.", "kind": "Native", "serial": 2026120201, "account": "", "dnssec": False, "rrsetCount": 2, "pluginBuild": "0.1.0"}}
apv = f"{G}/{V}"; kind = crd["spec"]["names"]["kind"]
def apply_fin(i): req("PATCH", f"{base}/{i}?fieldManager=orchard-exp&force=true", {"apiVersion": apv, "kind": kind, "metadata": {"name": i, "finalizers": ["exp.orchard.dev/finalizer"]}}, "application/apply-patch+yaml")
def merge_fin(i): req("PATCH", f"{base}/{i}?fieldManager=orchard-exp", {"metadata": {"finalizers": ["exp.orchard.dev/finalizer"]}}, "application/merge-patch+json")
def apply_status(gen): return lambda i: req("PATCH", f"{base}/{i}/status?fieldManager=orchard-exp&force=true", {"apiVersion": apv, "kind": kind, "metadata": {"name": i}, "status": status(i, gen)}, "application/apply-patch+yaml")
def merge_status(gen): return lambda i: req("PATCH", f"{base}/{i}/status?fieldManager=orchard-exp", {"status": status(i, gen)}, "application/merge-patch+json")
def apply_release(i): req("PATCH", f"{base}/{i}?fieldManager=orchard-exp&force=true", {"apiVersion": apv, "kind": kind, "metadata": {"name": i}}, "application/apply-patch+yaml")
def merge_release(i): req("PATCH", f"{base}/{i}?fieldManager=orchard-exp", {"metadata": {"finalizers": None}}, "application/merge-patch+json")
for rnd in range(2):
    measure(f"[{rnd}] finalizer: SSA apply (half A)", apply_fin, half_a)
    measure(f"[{rnd}] finalizer: merge patch (half B)", merge_fin, half_b)
    measure(f"[{rnd}] status: SSA apply (half A)", apply_status(rnd + 1), half_a)
    measure(f"[{rnd}] status: merge patch (half B)", merge_status(rnd + 1), half_b)
    measure(f"[{rnd}] release: SSA apply (half A)", apply_release, half_a)
    measure(f"[{rnd}] release: merge patch (half B)", merge_release, half_b)
measure("delete", lambda i: req("DELETE", f"{base}/{i}"), names)
