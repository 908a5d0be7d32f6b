#!/usr/bin/env bash
# End to end, on a real component: builds the two-version example (sdk/python/examples/versioned)
# with sdk/python/build.sh (world versioned-actuator-plugin, since its app.py binds `Conversion`)
# and asks the host CLI for its description and conversions, both ways.
#   sdk/python/tests/component.sh [path/to/orchard] [one-version.wasm] [example.wasm]
# (default: orchard on PATH). example.wasm, when given, is the example already built (`make
# plugins` builds it as python_versioned_example.wasm): used instead of a build here. one-version.wasm, when given, is a Python plugin of one
# API version (e.g. the rabbitmq_vhost.wasm `make plugins` builds, whose Actuator lists no
# versions): checked to describe one version and to convert nothing, as every Python component
# before WIT 0.1.2; and, when it is rabbitmq_vhost.wasm, to declare the shortcut its app.py
# exports (`Shortcuts = export_shortcuts(Vhost)`: delete-is-synchronous and delete-by-id, world
# shortcut-actuator-plugin).
# Needs componentize-py (sdk/install-tools.sh) and an orchard binary; the unit tests are the
# native part (python -m unittest discover -s sdk/python/tests).
set -euo pipefail
PY=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ORCHARD=${1:-orchard}
ONE_VERSION=${2:-}
EXAMPLE=${3:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ex=$PY/examples/versioned
fail() { echo "sdk/python/tests/component.sh: $*" >&2; exit 1; }

if [ -n "$EXAMPLE" ]; then
  cp "$EXAMPLE" "$out/upstream.wasm"
else
  bash "$PY/build.sh" "$ex" "$out/upstream.wasm"
fi
invoke() { "$ORCHARD" invoke "$@"; }

invoke "$out/upstream.wasm" describe >"$out/describe.json"
# The same version: the object as it is (the SDK answers it, the plugin is not called), as JSON.
invoke "$out/upstream.wasm" convert --to v1alpha1 --object "$ex/upstream-v1alpha1.yaml" >"$out/alpha.json"
invoke "$out/upstream.wasm" convert --to v1beta1 --object "$ex/upstream-v1alpha1.yaml" >"$out/alpha-beta.json"
invoke "$out/upstream.wasm" convert --to v1alpha1 --object "$out/alpha-beta.json" >"$out/alpha-back.json"
invoke "$out/upstream.wasm" convert --to v1beta1 --object "$ex/upstream-v1beta1.yaml" >"$out/beta.json"
invoke "$out/upstream.wasm" convert --to v1alpha1 --object "$ex/upstream-v1beta1.yaml" >"$out/beta-alpha.json"
invoke "$out/upstream.wasm" convert --to v1beta1 --object "$out/beta-alpha.json" >"$out/beta-back.json"
# A failure of the plugin's convert (a server without a host), and a version the kind does not list.
# (The first `- host: a.example` is spec.resource's; GNU sed's 0,/re/ changes that one only.)
sed '0,/^      - host: a.example$/s//      - weight: 1/' "$ex/upstream-v1beta1.yaml" >"$out/broken.yaml"
[ "$(grep -c '^      - weight: 1$' "$out/broken.yaml")" = 1 ] || fail "broken.yaml was not made: the sample changed"
if invoke "$out/upstream.wasm" convert --to v1alpha1 --object "$out/broken.yaml" >/dev/null 2>"$out/broken.err"; then
  fail "an object with a server without a host converted"
fi
if invoke "$out/upstream.wasm" convert --to v2 --object "$ex/upstream-v1alpha1.yaml" >/dev/null 2>"$out/v2.err"; then
  fail "converted to a version the plugin does not list"
fi
checked_one=""
if [ -n "$ONE_VERSION" ]; then
  invoke "$ONE_VERSION" describe >"$out/one.json"
  if invoke "$ONE_VERSION" convert --to v1beta1 --object "$ex/upstream-v1alpha1.yaml" >/dev/null 2>"$out/one.err"; then
    fail "$ONE_VERSION (one version) converted an object"
  fi
  checked_one=1
fi

python3 - "$out" "$checked_one" <<'PY'
import json, sys
out, checked_one = sys.argv[1], sys.argv[2]
def load(name):
    with open(f"{out}/{name}") as f:
        return json.load(f)
def text(name):
    with open(f"{out}/{name}") as f:
        return f.read()
d = load("describe.json")
assert d["version"] == "v1beta1", d["version"]
assert [(v["name"], v["storage"]) for v in d["versions"]] == [("v1alpha1", False), ("v1beta1", True)], d["versions"]
alpha, beta = load("alpha.json"), load("alpha-beta.json")
assert alpha["apiVersion"] == "examples.orchard.dev/v1alpha1", alpha["apiVersion"]
assert alpha["spec"]["resource"] == {"name": "web", "hosts": ["a.example", "b.example"]}, alpha["spec"]
assert beta["apiVersion"] == "examples.orchard.dev/v1beta1", beta["apiVersion"]
assert beta["spec"]["resource"] == {
    "name": "web", "servers": [{"host": "a.example"}, {"host": "b.example", "weight": 5}],
}, beta["spec"]["resource"]
assert beta["status"]["resource"] == {"servers": [{"host": "a.example"}]}, beta["status"]
# The weight moved from the annotation into its field; every other annotation is kept.
assert beta["metadata"]["annotations"] == {"team": "web"}, beta["metadata"]
assert {k: v for k, v in beta["metadata"].items() if k != "annotations"} == {
    k: v for k, v in alpha["metadata"].items() if k != "annotations"
}, "the envelope changed"
assert load("alpha-back.json") == alpha, "v1alpha1 -> v1beta1 -> v1alpha1 lost something"
fresh, down = load("beta.json"), load("beta-alpha.json")
assert fresh["spec"]["resource"]["servers"][1] == {"host": "b.example", "weight": 5}, fresh["spec"]
assert down["spec"]["resource"] == {"name": "web", "hosts": ["a.example", "b.example"]}, down["spec"]
assert down["status"]["resource"] == {"hosts": ["a.example"]}, down["status"]
assert down["metadata"]["annotations"] == {
    "team": "web", "examples.orchard.dev/v1beta1-server-weights": '{"b.example":5}',
}, down["metadata"]
assert load("beta-back.json") == fresh, "v1beta1 -> v1alpha1 -> v1beta1 lost something"
for name, says in (
    ("broken.err", "InvalidConfiguration failure: spec.resource.servers: {\"weight\": 1} is not a server with a host"),
    ("v2.err", "this plugin serves versions v1alpha1, v1beta1: cannot convert v1alpha1 to v2"),
):
    err = text(name)
    assert says in err, err
checks = "describe (2 versions, storage v1beta1), 4 conversions and 2 round trips, 2 refusals"
if checked_one:
    one = load("one.json")
    assert "versions" not in one, "the one-version plugin lists versions"
    assert "serves one API version" in text("one.err"), text("one.err")
    checks += "; a one-version plugin: one version, converts nothing"
    if one["name"] == "rabbitmq-vhost":
        declared = {"createRefusesDuplicates": False, "deleteIsSynchronous": True, "deleteById": True}
        assert one.get("shortcuts") == declared, one.get("shortcuts")
        checks += ", declares delete-is-synchronous and delete-by-id"
print(f"sdk/python/tests/component.sh: {checks}: ok")
PY
