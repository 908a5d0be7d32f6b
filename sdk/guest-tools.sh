# Sourced by sdk/install-tools.sh, sdk/go/build.sh and sdk/c/build.sh: the pinned tool versions
# of the Go and C SDKs and where they are installed.
WASM_TOOLS_VERSION=1.263.0
WIT_BINDGEN_VERSION=0.63.0 # the wit-bindgen of the Rust SDK (sdk/rust/Cargo.toml)
ADAPTER_VERSION=48.0.8     # the wasmtime of the host
GUEST_TOOLS=${ORCHARD_GUEST_TOOLS:-$HOME/.cache/orchard/guest-tools}
WASI_ADAPTER=$GUEST_TOOLS/wasi_snapshot_preview1.reactor-$ADAPTER_VERSION.wasm
WASM_TOOLS=$GUEST_TOOLS/bin/wasm-tools
WIT_BINDGEN=$GUEST_TOOLS/bin/wit-bindgen
