//! Pre-initialises a core WebAssembly module at build time: runs its start-up once and writes a
//! module that starts from the state the start-up left (Wizer, as a library).
//!
//! `sdk/go/build.sh` runs it on every Go plugin's core module before it becomes a component: a Go
//! module's `_initialize` (the runtime's start-up and every package's init functions — for a
//! plugin on `net/http`, ≈ 0.5 ms of a fresh instance's ≈ 1 ms) then runs once, here, instead of
//! in every instance the host makes for a call (docs/benchmarks.md, "Go pre-initialised").
//!
//! The phases, in order:
//! 1. **One data segment** (`segments::merge_active`): the input's active data segments as one
//!    (Go writes 100,000, the most a module may have, and the snapshot's own come beside them);
//! 2. **Instrument** (Wizer): globals and memories exported for the snapshot;
//! 3. **Start up** ([`startup`]): instantiate with the start-up shim — the few WASI preview-1
//!    imports a start-up may call, answered as the host answers a fresh instance; any other
//!    import fails the run, naming it — and call the init export;
//! 4. **Snapshot** (Wizer): memory and globals as the start-up left them; the init export is
//!    removed, and the resume export, when named, is exported as `_initialize` instead, so
//!    that the component calls it once in every instance before anything else (what each
//!    instance must still do itself: the Go SDK's `resume` reseeds the runtime's random state);
//! 5. **Validate** the result.
//!
//! What a snapshot freezes is the caveat of every pre-initialiser: whatever the start-up read
//! (the clock, entropy, the absence of arguments and environment) is the build's, in every
//! instance. The resume export is where an instance takes what must be its own.

mod segments;
pub mod startup;

use wasmtime::{Config, Engine, Module, Store};
use wasmtime_wizer::{InstanceState, SnapshotVal, ValType, Wizer};

/// What went wrong, naming the part of the module.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input is not a core module this tool reads.
    #[error("not a valid core WebAssembly module: {0}")]
    Parse(#[from] wasmparser::BinaryReaderError),
    /// A data segment this tool cannot merge.
    #[error("data segment {index}: {why}")]
    Segment {
        /// The segment's index in the data section.
        index: u32,
        /// Why it cannot be merged.
        why: String,
    },
    /// An export the run needs is missing or has another type.
    #[error("the module exports no function `{0}` taking and returning nothing")]
    Export(String),
    /// The start-up trapped, called an import the shim does not answer, or exited.
    #[error(
        "the module's start-up (`{export}`) failed: {error:?}\n\
         (a start-up may read arguments, environment, clocks and entropy and write to stdout \
         and stderr; what else it needs from the host belongs in a call)"
    )]
    StartUp {
        /// The init export.
        export: String,
        /// The trap or error, with the Wasm backtrace.
        error: wasmtime::Error,
    },
    /// Wizer, or wasmtime around it, failed.
    #[error("{what}: {error:?}")]
    Wasm {
        /// The step.
        what: &'static str,
        /// The error.
        error: wasmtime::Error,
    },
    /// The pre-initialised module does not validate (a defect of this tool or of Wizer).
    #[error("the pre-initialised module is not valid: {0}")]
    Invalid(wasmparser::BinaryReaderError),
}

/// What to run and what to export.
#[derive(Debug, Clone)]
pub struct Options {
    /// The export the start-up is: run once, then removed (`_initialize` for a Go module
    /// built with `-buildmode=c-shared`).
    pub init: String,
    /// An export to be the pre-initialised module's `_initialize` (run once in each instance,
    /// before any other export), or none.
    pub resume: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            init: "_initialize".into(),
            resume: None,
        }
    }
}

/// Runs the start-up of `wasm` and returns the pre-initialised module.
pub async fn preinit(wasm: &[u8], options: &Options) -> Result<Vec<u8>, Error> {
    // 1. One data segment.
    let merged = segments::merge_active(wasm)?;
    for export in std::iter::once(&options.init).chain(&options.resume) {
        check_export(&merged, export)?;
    }

    // 2. Instrument.
    let mut wizer = Wizer::new();
    wizer.init_func(options.init.clone());
    if let Some(resume) = &options.resume {
        wizer.func_rename("_initialize", resume);
    }
    let (cx, instrumented) = wizer.instrument(&merged).map_err(|error| Error::Wasm {
        what: "instrumenting the module",
        error,
    })?;

    // 3. Start up.
    let engine = Engine::new(&Config::new()).map_err(|error| Error::Wasm {
        what: "making the engine",
        error,
    })?;
    let module = Module::new(&engine, &instrumented).map_err(|error| Error::Wasm {
        what: "compiling the instrumented module",
        error,
    })?;
    let linker = startup::linker(&engine, &module).map_err(|error| Error::Wasm {
        what: "linking the start-up shim",
        error,
    })?;
    let mut store = Store::new(&engine, startup::Shim::default());
    let start_up = |error| Error::StartUp {
        export: options.init.clone(),
        error,
    };
    let instance = linker
        .instantiate_async(&mut store, &module)
        .await
        .map_err(start_up)?;
    let init = instance
        .get_typed_func::<(), ()>(&mut store, &options.init)
        .map_err(start_up)?;
    init.call_async(&mut store, ()).await.map_err(start_up)?;

    // 4. Snapshot.
    let snapshot = wizer
        .snapshot(
            &cx,
            &mut Snapshot {
                store: &mut store,
                instance,
            },
        )
        .await
        .map_err(|error| Error::Wasm {
            what: "snapshotting the module",
            error,
        })?;

    // 5. Validate.
    wasmparser::Validator::new()
        .validate_all(&snapshot)
        .map_err(Error::Invalid)?;
    Ok(snapshot)
}

/// `export` is a function export of type `[] -> []`.
fn check_export(wasm: &[u8], export: &str) -> Result<(), Error> {
    let mut functions = Vec::new(); // type index of each function, imported ones first
    let mut types = Vec::new(); // (params, results) of each function type
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        match payload? {
            wasmparser::Payload::TypeSection(reader) => {
                for ty in reader.into_iter_err_on_gc_types() {
                    let ty = ty?;
                    types.push((ty.params().len(), ty.results().len()));
                }
            }
            wasmparser::Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    if let wasmparser::TypeRef::Func(index) = import?.ty {
                        functions.push(index);
                    }
                }
            }
            wasmparser::Payload::FunctionSection(reader) => {
                for index in reader {
                    functions.push(index?);
                }
            }
            wasmparser::Payload::ExportSection(reader) => {
                for e in reader {
                    let e = e?;
                    if e.name == export && e.kind == wasmparser::ExternalKind::Func {
                        let ty = functions
                            .get(e.index as usize)
                            .and_then(|t| types.get(*t as usize));
                        return match ty {
                            Some((0, 0)) => Ok(()),
                            _ => Err(Error::Export(export.to_string())),
                        };
                    }
                }
            }
            _ => {}
        }
    }
    Err(Error::Export(export.to_string()))
}

/// The running instance, as Wizer reads it.
struct Snapshot<'a> {
    store: &'a mut Store<startup::Shim>,
    instance: wasmtime::Instance,
}

impl InstanceState for Snapshot<'_> {
    async fn global_get(&mut self, name: &str, _: ValType) -> SnapshotVal {
        // Wizer asks only for the globals its instrumentation exported, of the types it
        // snapshots: a miss is a defect of Wizer, not of the input.
        #[allow(
            clippy::expect_used,
            reason = "an export Wizer's own instrumentation added"
        )]
        let global = self
            .instance
            .get_global(&mut *self.store, name)
            .expect("an instrumented global");
        match global.get(&mut *self.store) {
            wasmtime::Val::I32(x) => SnapshotVal::I32(x),
            wasmtime::Val::I64(x) => SnapshotVal::I64(x),
            wasmtime::Val::F32(x) => SnapshotVal::F32(x),
            wasmtime::Val::F64(x) => SnapshotVal::F64(x),
            wasmtime::Val::V128(x) => SnapshotVal::V128(x.as_u128()),
            #[allow(
                clippy::panic,
                reason = "Wizer's instrumentation exports no reference globals"
            )]
            other => panic!(
                "global {name}: a {:?} cannot be snapshotted",
                other.ty(&*self.store)
            ),
        }
    }

    async fn memory_contents(&mut self, name: &str, contents: impl FnOnce(&[u8]) + Send) {
        #[allow(
            clippy::expect_used,
            reason = "an export Wizer's own instrumentation added"
        )]
        let memory = self
            .instance
            .get_memory(&mut *self.store, name)
            .expect("an instrumented memory");
        contents(memory.data(&*self.store));
    }
}
