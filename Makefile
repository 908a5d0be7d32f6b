# Orchard: the two commands a newcomer needs are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
export CARGO_BUILD_JOBS ?= 2

PLUGINS := -p pdns-zone -p pdns-record -p orchard-fixture-faulty -p orchard-fixture-echo

.PHONY: test demo demo-down plugins deps env-up env-down bench fmt lint

## Every test: installs what it needs, builds the plugins, brings the test environment up,
## runs all suites, and brings the environment down even when a test fails.
test:
	bash tests/run.sh

## The main job: environment up, plugins built, host running, a sample applied.
demo:
	bash tests/demo.sh up

demo-down:
	bash tests/demo.sh down

## Installs apt packages, the wasm32-wasip2 target and the Go-built kube-apiserver/etcd.
deps:
	bash tests/env/install-deps.sh

## Builds every plugin component from source (target/wasm32-wasip2/plugin/*.wasm).
plugins:
	cargo build --profile plugin --target wasm32-wasip2 $(PLUGINS)

env-up:
	bash tests/env/testenv.sh up

env-down:
	bash tests/env/testenv.sh down

bench: plugins
	cargo bench -p orchard --bench calls

fmt:
	cargo fmt --all

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets
