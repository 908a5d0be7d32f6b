# Orchard: the two commands a newcomer needs are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
export CARGO_BUILD_JOBS ?= 2

PLUGINS := -p pdns-zone -p pdns-record -p orchard-fixture-faulty -p orchard-fixture-bad-describe -p orchard-fixture-echo -p orchard-fixture-echo-wit-0-1-0 -p orchard-fixture-conformance-broken

# Python and JavaScript plugins, built by their SDKs' build commands into the same folder.
PLUGIN_DIR := $(or $(CARGO_TARGET_DIR),target)/wasm32-wasip2/plugin
PY_SDK := $(wildcard sdk/python/orchard_sdk/*.py) sdk/python/build.sh sdk/python/requirements.txt
JS_SDK := $(wildcard sdk/js/src/*.js) sdk/js/build.mjs sdk/js/package-lock.json
WIT := $(wildcard wit/*.wit wit/deps/*/*.wit)
RABBITMQ_CLIENT := plugins/rabbitmq-client/rabbitmq_client.py
GO_SDK := $(wildcard sdk/go/*.go sdk/go/go.mod sdk/go/go.sum sdk/go/schema/*.go sdk/go/internal/wit/*/*.go sdk/go/internal/wit/*/*/*.go) sdk/go/build.sh sdk/go/gowork.sh sdk/guest-tools.sh \
	sdk/go/runtime_reseed.go.in $(wildcard tools/preinit/src/*.rs) tools/preinit/Cargo.toml
C_SDK := $(wildcard sdk/c/*.c sdk/c/*.h) sdk/c/build.sh sdk/guest-tools.sh
GO_PLUGIN_DIRS := plugins/rabbitmq-exchange plugins/pdns-tsig-go
GUEST_PLUGINS := $(PLUGIN_DIR)/rabbitmq_vhost.wasm $(PLUGIN_DIR)/rabbitmq_queue.wasm $(PLUGIN_DIR)/rabbitmq_user.wasm \
	$(PLUGIN_DIR)/rabbitmq_exchange.wasm $(PLUGIN_DIR)/pdns_tsig.wasm $(PLUGIN_DIR)/pdns_tsig_go.wasm \
	$(PLUGIN_DIR)/python_versioned_example.wasm

.PHONY: test demo demo-down demo-status plugins rust-plugins host-plugins guest-tools guest-plugins deps env-up env-down bench fmt lint

## Every test: installs what it needs, builds the plugins, brings the test environment up,
## runs all suites, and brings the environment down even when a test fails.
test:
	bash tests/run.sh

## The main job: a demo environment of its own (.demo), plugins built, the host running in
## namespace orchard-demo, a sample applied. `make test` runs beside it in .testenv.
demo:
	bash tests/demo.sh up

demo-down:
	bash tests/demo.sh down

demo-status:
	bash tests/demo.sh status

## Installs apt packages, the wasm32-wasip2 target and the Go-built kube-apiserver/etcd.
deps:
	bash tests/env/install-deps.sh

## Builds every plugin component from source (target/wasm32-wasip2/plugin/*.wasm): Rust,
## Python (componentize-py), JavaScript (componentize-js), Go (mainline Go) and C (clang).
plugins: rust-plugins guest-plugins

## Builds of the same crate with other build-time settings (option_env!) are files of their own,
## rebuilt only when their sources change: each costs a recompile of its crate, and the regular
## build after it another.
RUST_GUEST_SRC := $(shell find sdk/rust wit -type f \( -name '*.rs' -o -name '*.toml' -o -name '*.wit' \)) Cargo.toml Cargo.lock
PDNS_ZONE_SRC := $(shell find plugins/pdns-zone plugins/pdns-client -type f \( -name '*.rs' -o -name '*.toml' \)) $(RUST_GUEST_SRC)
FAULTY_SRC := $(shell find tests/fixtures/faulty -type f \( -name '*.rs' -o -name '*.toml' \)) $(RUST_GUEST_SRC)
RUST_PLUGIN_VARIANTS := $(PLUGIN_DIR)/pdns_zone_next.wasm $(PLUGIN_DIR)/pdns_zone_evolution_v1alpha1.wasm \
	$(PLUGIN_DIR)/pdns_zone_evolution_v1beta1.wasm $(PLUGIN_DIR)/faulty_convertible_v1alpha1.wasm \
	$(PLUGIN_DIR)/faulty_convertible_v1beta1.wasm
CARGO_PLUGIN := cargo build --profile plugin --target wasm32-wasip2

## A second build of pdns-zone (observed.pluginBuild "<version>+next") for the hot-swap tests.
$(PLUGIN_DIR)/pdns_zone_next.wasm: $(PDNS_ZONE_SRC)
	ORCHARD_PLUGIN_BUILD=next $(CARGO_PLUGIN) -p pdns-zone
	cp $(PLUGIN_DIR)/pdns_zone.wasm $@

## The schema-evolution scenarios' two builds, on a group of their own: today's DnsZone
## (v1alpha1) and the next (v1alpha1 and v1beta1, converted by the plugin).
$(PLUGIN_DIR)/pdns_zone_evolution_v1alpha1.wasm: $(PDNS_ZONE_SRC)
	ORCHARD_PDNS_ZONE_GROUP=evolution.pdns.orchard.dev $(CARGO_PLUGIN) -p pdns-zone
	cp $(PLUGIN_DIR)/pdns_zone.wasm $@

$(PLUGIN_DIR)/pdns_zone_evolution_v1beta1.wasm: $(PDNS_ZONE_SRC)
	ORCHARD_PDNS_ZONE_GROUP=evolution.pdns.orchard.dev ORCHARD_PLUGIN_BUILD=v1beta1 $(CARGO_PLUGIN) -p pdns-zone --features v1beta1
	cp $(PLUGIN_DIR)/pdns_zone.wasm $@

## The conversion scenarios' fault fixture, on a group of its own: one version, then two.
$(PLUGIN_DIR)/faulty_convertible_v1alpha1.wasm: $(FAULTY_SRC)
	ORCHARD_FAULTY_GROUP=convertible.fixtures.orchard.dev $(CARGO_PLUGIN) -p orchard-fixture-faulty
	cp $(PLUGIN_DIR)/orchard_fixture_faulty.wasm $@

$(PLUGIN_DIR)/faulty_convertible_v1beta1.wasm: $(FAULTY_SRC)
	ORCHARD_FAULTY_GROUP=convertible.fixtures.orchard.dev $(CARGO_PLUGIN) -p orchard-fixture-faulty --features v1beta1
	cp $(PLUGIN_DIR)/orchard_fixture_faulty.wasm $@

## The variants first (one at a time: they share the crate's output file), then the regular
## builds, so that the last build in place is the regular one.
rust-plugins:
	@$(MAKE) --no-print-directory -j1 $(RUST_PLUGIN_VARIANTS)
	@$(MAKE) --no-print-directory host-plugins
## The regular Rust builds alone (pdns-zone and pdns-record: all `make demo` runs), built as one
## set with the fixtures so that their dependencies resolve the same features as in rust-plugins.
host-plugins:
	$(CARGO_PLUGIN) $(PLUGINS)

## componentize-py (a venv), the npm packages of sdk/js, wasm-tools and wit-bindgen for Go
## and C; quick when already there.
guest-tools:
	bash sdk/install-tools.sh

guest-plugins: guest-tools
	@# The Go modules of the Go SDK and plugins into the module cache (their builds and
	@# `go test` in sdk/go download nothing); no network once they are there.
	sdk/go/download.sh $(GO_PLUGIN_DIRS)
	@$(MAKE) --no-print-directory $(GUEST_PLUGINS)

$(PLUGIN_DIR)/rabbitmq_vhost.wasm: $(wildcard plugins/rabbitmq-vhost/*.py) $(RABBITMQ_CLIENT) $(PY_SDK) $(WIT)
	sdk/python/build.sh plugins/rabbitmq-vhost $@ plugins/rabbitmq-client

$(PLUGIN_DIR)/rabbitmq_queue.wasm: $(wildcard plugins/rabbitmq-queue/*.py) $(RABBITMQ_CLIENT) $(PY_SDK) $(WIT)
	sdk/python/build.sh plugins/rabbitmq-queue $@ plugins/rabbitmq-client

## The Python SDK's two-version example (world versioned-actuator-plugin), for
## sdk/python/tests/component.sh in make test.
$(PLUGIN_DIR)/python_versioned_example.wasm: $(wildcard sdk/python/examples/versioned/*.py) $(PY_SDK) $(WIT)
	sdk/python/build.sh sdk/python/examples/versioned $@

$(PLUGIN_DIR)/rabbitmq_user.wasm: $(wildcard plugins/rabbitmq-user/*.js) $(JS_SDK) $(WIT)
	sdk/js/build.sh plugins/rabbitmq-user $@

## Go plugins: their own tests run natively (sdk/go/test.sh), then built.
$(PLUGIN_DIR)/rabbitmq_exchange.wasm: $(wildcard plugins/rabbitmq-exchange/*.go plugins/rabbitmq-exchange/go.mod) $(GO_SDK) $(WIT)
	sdk/go/test.sh plugins/rabbitmq-exchange
	sdk/go/build.sh plugins/rabbitmq-exchange $@

$(PLUGIN_DIR)/pdns_tsig_go.wasm: $(wildcard plugins/pdns-tsig-go/*.go plugins/pdns-tsig-go/pdnsapi/*.go plugins/pdns-tsig-go/go.*) $(GO_SDK) $(WIT)
	sdk/go/test.sh plugins/pdns-tsig-go
	sdk/go/build.sh plugins/pdns-tsig-go $@

$(PLUGIN_DIR)/pdns_tsig.wasm: $(wildcard plugins/pdns-tsig/*.c plugins/pdns-tsig/*.h) $(C_SDK) $(WIT)
	sdk/c/build.sh plugins/pdns-tsig $@

env-up:
	bash tests/env/testenv.sh up

env-down:
	bash tests/env/testenv.sh down

bench: plugins
	cargo bench -p orchard --bench calls

fmt:
	cargo fmt --all

## What CI checks before the tests: rustfmt, clippy (pedantic) and rustdoc, warnings as errors.
lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS=-Dwarnings cargo doc --no-deps --workspace --quiet

## Throughput at scale (docs/benchmarks.md "Throughput"): all contenders, N=1000 by default;
## `make bench-throughput BENCH_ARGS="--objects 200 --contenders orchard-component,kopf"`.
.PHONY: bench-throughput
bench-throughput:
	bash bench/run.sh $(BENCH_ARGS)
