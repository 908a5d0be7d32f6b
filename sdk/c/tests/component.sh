#!/usr/bin/env bash
# End to end, on real components: builds the two-version example (sdk/c/examples/greeting) with
# sdk/c/build.sh and asks the host CLI for its description and conversions, both ways; builds
# plugins/pdns-tsig (no versions) and checks that it describes one version.
#   sdk/c/tests/component.sh [path/to/orchard]      (default: orchard on PATH)
# Needs the guest tools (sdk/install-tools.sh) and an orchard binary; sdk/c/tests/run.sh is the
# native part.
set -euo pipefail
C=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ORCHARD=${1:-orchard}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ex=$C/examples/greeting
fail() { echo "sdk/c/tests/component.sh: $*" >&2; exit 1; }

bash "$C/build.sh" "$ex" "$out/greeting.wasm"
bash "$C/build.sh" "$C/../../plugins/pdns-tsig" "$out/pdns_tsig.wasm"
invoke() { "$ORCHARD" invoke "$@"; }

invoke "$out/greeting.wasm" describe >"$out/describe.json"
invoke "$out/pdns_tsig.wasm" describe >"$out/tsig.json"
# The same version: the object as it is (the SDK answers it), as JSON.
invoke "$out/greeting.wasm" convert --to v1alpha1 --object "$ex/hello-v1alpha1.yaml" >"$out/hello.json"
invoke "$out/greeting.wasm" convert --to v1beta1 --object "$ex/hello-v1alpha1.yaml" >"$out/hello-beta.json"
invoke "$out/greeting.wasm" convert --to v1alpha1 --object "$out/hello-beta.json" >"$out/hello-back.json"
invoke "$out/greeting.wasm" convert --to v1beta1 --object "$ex/hello-v1beta1.yaml" >"$out/bonjour.json"
invoke "$out/greeting.wasm" convert --to v1alpha1 --object "$ex/hello-v1beta1.yaml" >"$out/bonjour-alpha.json"
invoke "$out/greeting.wasm" convert --to v1beta1 --object "$out/bonjour-alpha.json" >"$out/bonjour-back.json"
# A failure of the plugin's convert, and a version it does not list.
sed 's/^    message:$/    message: not-an-object/; /^      text:/d; /^      lang:/d' "$ex/hello-v1beta1.yaml" >"$out/broken.yaml"
if invoke "$out/greeting.wasm" convert --to v1alpha1 --object "$out/broken.yaml" >/dev/null 2>"$out/broken.err"; then
  fail "a broken object converted"
fi
if invoke "$out/greeting.wasm" convert --to v2 --object "$ex/hello-v1alpha1.yaml" >/dev/null 2>"$out/v2.err"; then
  fail "converted to a version the plugin does not list"
fi

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def load(name):
    with open(f"{out}/{name}") as f:
        return json.load(f)
d = load("describe.json")
assert d["version"] == "v1beta1", d["version"]
assert [(v["name"], v["storage"]) for v in d["versions"]] == [("v1alpha1", False), ("v1beta1", True)], d["versions"]
assert "versions" not in load("tsig.json"), "pdns-tsig lists versions"
hello, beta = load("hello.json"), load("hello-beta.json")
assert beta["apiVersion"] == "greetings.example.com/v1beta1", beta["apiVersion"]
assert beta["spec"]["resource"] == {"name": "hello", "message": {"text": "Hello, world"}}, beta["spec"]["resource"]
assert beta["status"] == hello["status"] and beta["metadata"] == hello["metadata"], "the envelope changed"
assert load("hello-back.json") == hello, "v1alpha1 -> v1beta1 -> v1alpha1 lost something"
bonjour, alpha = load("bonjour.json"), load("bonjour-alpha.json")
assert alpha["spec"]["resource"] == {"name": "bonjour", "text": "Bonjour"}, alpha["spec"]["resource"]
assert alpha["metadata"]["annotations"] == {"team": "docs", "greetings.example.com/v1beta1-lang": "fr"}, alpha["metadata"]
assert load("bonjour-back.json") == bonjour, "v1beta1 -> v1alpha1 -> v1beta1 lost something"
for name, says in (("broken.err", "spec.resource.message is not an object"), ("v2.err", "cannot convert v1alpha1 to v2")):
    with open(f"{out}/{name}") as f:
        err = f.read()
    assert says in err, err
print("sdk/c/tests/component.sh: describe (2 versions, storage v1beta1), 4 conversions and 2 round trips, 2 refusals: ok")
PY
