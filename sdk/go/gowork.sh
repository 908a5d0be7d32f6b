# Sourced by sdk/go/build.sh and sdk/go/test.sh: write_gowork <go.work> <plugin-dir> writes the
# workspace a plugin is built and tested in — the plugin, this SDK and the vendored wit
# runtime — so that the plugin's go.mod needs no replace directives.
write_gowork() {
  local out=$1 plugin=$2 sdk
  sdk=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  # The version of orchard.dev/sdk the plugin requires (any: v0.0.0 in this repository) is
  # replaced by this checkout too. Without it, the go command looks that version up to load
  # the SDK's own requirements (github.com/invopop/jsonschema, …), which GOPROXY=off refuses.
  local version
  version=$(awk '$1 == "orchard.dev/sdk" { print $2 } $1 == "require" && $2 == "orchard.dev/sdk" { print $3 }' "$plugin/go.mod" | head -n 1)
  cat >"$out" <<WORK
go 1.26

use (
	$plugin
	$sdk
	$sdk/third_party/pkg
)
WORK
  if [ -n "$version" ]; then
    printf '\nreplace orchard.dev/sdk %s => %s\n' "$version" "$sdk" >>"$out"
  fi
}

# check_modules <plugin-dir>: with GOWORK and GOPROXY=off exported, fails with a hint when a
# module the SDK or the plugin needs is not in the module cache.
check_modules() {
  if ! (cd "$1" && go mod download >/dev/null 2>&1); then
    echo "$(basename "$0"): Go modules of the SDK or of $1 are not in the module cache (GOPROXY=off here): run sdk/go/download.sh $1 once" >&2
    return 1
  fi
}
