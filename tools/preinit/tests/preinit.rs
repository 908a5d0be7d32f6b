//! `orchard_preinit::preinit` on small modules written in WAT: what the snapshot keeps, what
//! runs in each instance, and the start-ups it refuses.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

use orchard_preinit::{Error, Options, preinit};
use wasmtime::{Engine, Instance, Module, Store};

/// A module whose start-up writes memory and a global, with its data in several segments, and
/// an export that counts the instance's own resumes.
const MODULE: &str = r#"
(module
  (memory (export "memory") 1)
  (global $g (mut i32) (i32.const 0))
  (data (i32.const 16) "abc")
  (data (i32.const 64) "xyz")
  (data (i32.const 17) "B")
  (func (export "_initialize")
    (i32.store (i32.const 1000) (i32.const 42))
    (global.set $g (i32.const 7)))
  (func (export "orchard-resume")
    (i32.store (i32.const 2000) (i32.add (i32.load (i32.const 2000)) (i32.const 1))))
  (func (export "read") (param i32) (result i32) (i32.load8_u (local.get 0)))
  (func (export "state") (result i32)
    (i32.add (i32.load (i32.const 1000)) (global.get $g)))
  (func (export "resumed") (result i32) (i32.load (i32.const 2000))))
"#;

fn run(wasm: &[u8], options: &Options) -> Result<Vec<u8>, Error> {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(preinit(wasm, options))
}

fn instantiate(wasm: &[u8]) -> (Store<()>, Instance) {
    let engine = Engine::default();
    let module = Module::new(&engine, wasm).unwrap();
    let mut store = Store::new(&engine, ());
    // The snapshot makes no call: an import it calls would trap.
    let mut linker = wasmtime::Linker::new(&engine);
    linker.define_unknown_imports_as_traps(&module).unwrap();
    let instance = linker.instantiate(&mut store, &module).unwrap();
    (store, instance)
}

fn call(store: &mut Store<()>, instance: &Instance, name: &str) -> i32 {
    instance
        .get_typed_func::<(), i32>(&mut *store, name)
        .unwrap()
        .call(&mut *store, ())
        .unwrap()
}

fn resuming() -> Options {
    Options {
        resume: Some("orchard-resume".into()),
        ..Options::default()
    }
}

#[test]
fn a_pre_initialised_module_starts_from_the_memory_and_globals_its_start_up_left() {
    let out = run(&wat::parse_str(MODULE).unwrap(), &Options::default()).unwrap();
    let (mut store, instance) = instantiate(&out);
    assert_eq!(
        call(&mut store, &instance, "state"),
        49,
        "42 in memory + 7 in the global"
    );
    assert!(
        instance.get_func(&mut store, "_initialize").is_none(),
        "the start-up is not exported again"
    );
}

#[test]
fn the_data_of_the_input_segments_is_kept_as_written_later_ones_over_earlier() {
    let out = run(&wat::parse_str(MODULE).unwrap(), &Options::default()).unwrap();
    let (mut store, instance) = instantiate(&out);
    let read = instance
        .get_typed_func::<i32, i32>(&mut store, "read")
        .unwrap();
    let at = |store: &mut Store<()>, a| u8::try_from(read.call(store, a).unwrap()).unwrap() as char;
    let text: String = [16, 17, 18, 64, 65, 66]
        .into_iter()
        .map(|a| at(&mut store, a))
        .collect();
    assert_eq!(text, "aBcxyz");
    assert_eq!(
        at(&mut store, 40),
        '\0',
        "the gap between segments stays zero"
    );
}

#[test]
fn the_resume_export_becomes_the_initialize_each_instance_runs_once() {
    let out = run(&wat::parse_str(MODULE).unwrap(), &resuming()).unwrap();
    let (mut store, instance) = instantiate(&out);
    assert_eq!(
        call(&mut store, &instance, "resumed"),
        0,
        "the build ran no resume: it is each instance's"
    );
    let init = instance
        .get_typed_func::<(), ()>(&mut store, "_initialize")
        .unwrap();
    init.call(&mut store, ()).unwrap();
    assert_eq!(call(&mut store, &instance, "resumed"), 1);
    assert_eq!(
        call(&mut store, &instance, "state"),
        49,
        "and the start-up's state is there"
    );
}

#[test]
fn the_start_up_reads_no_arguments_no_environment_and_a_monotonic_clock_that_is_never_zero() {
    let wat = r#"
(module
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $env (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_initialize")
    (i32.store (i32.const 0) (i32.const 99)) (i32.store (i32.const 4) (i32.const 99))
    (drop (call $args (i32.const 0) (i32.const 4)))
    (i32.store (i32.const 8) (i32.const 99)) (i32.store (i32.const 12) (i32.const 99))
    (drop (call $env (i32.const 8) (i32.const 12)))
    (drop (call $clock (i32.const 1) (i64.const 1) (i32.const 16)))
    (drop (call $clock (i32.const 1) (i64.const 1) (i32.const 24)))
    (drop (call $random (i32.const 100) (i32.const 32))))
  (func (export "word") (param i32) (result i64) (i64.load (local.get 0))))
"#;
    let out = run(&wat::parse_str(wat).unwrap(), &Options::default()).unwrap();
    let (mut store, instance) = instantiate(&out);
    let word = instance
        .get_typed_func::<i32, i64>(&mut store, "word")
        .unwrap();
    let mut at = |a| word.call(&mut store, a).unwrap();
    assert_eq!((at(0), at(8)), (0, 0), "no arguments, no environment");
    let (first, second) = (at(16), at(24));
    assert!(
        first > 0 && second > first,
        "monotonic readings {first}, {second}"
    );
    let entropy = [at(100), at(108), at(116), at(124)];
    assert!(
        entropy.iter().any(|w| *w != 0),
        "random_get filled the buffer"
    );
}

#[test]
fn a_start_up_calling_an_import_the_shim_does_not_answer_fails_naming_it() {
    let wat = r#"
(module
  (import "wasi_snapshot_preview1" "path_open"
    (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_initialize")
    (drop (call $open (i32.const 3) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)
      (i64.const 0) (i64.const 0) (i32.const 0) (i32.const 0)))))
"#;
    let error = run(&wat::parse_str(wat).unwrap(), &Options::default()).unwrap_err();
    assert!(matches!(error, Error::StartUp { .. }), "{error}");
    assert!(error.to_string().contains("path_open"), "{error}");
}

#[test]
fn a_start_up_that_exits_fails_with_its_code() {
    let wat = r#"
(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (func (export "_initialize") (call $exit (i32.const 3))))
"#;
    let error = run(&wat::parse_str(wat).unwrap(), &Options::default()).unwrap_err();
    assert!(error.to_string().contains("proc_exit 3"), "{error}");
}

#[test]
fn a_module_without_the_init_or_the_resume_export_is_refused_naming_it() {
    let no_init = r#"(module (memory (export "memory") 1) (func (export "start")))"#;
    let error = run(&wat::parse_str(no_init).unwrap(), &Options::default()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the module exports no function `_initialize` taking and returning nothing"
    );

    let wrong_type = r#"(module (memory (export "memory") 1) (func (export "_initialize"))
      (func (export "orchard-resume") (param i32)))"#;
    let error = run(&wat::parse_str(wrong_type).unwrap(), &resuming()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the module exports no function `orchard-resume` taking and returning nothing"
    );
}

#[test]
fn a_passive_data_segment_is_refused_naming_it() {
    let wat = r#"(module (memory (export "memory") 1)
      (data (i32.const 0) "a") (data "passive")
      (func (export "_initialize")))"#;
    let error = run(&wat::parse_str(wat).unwrap(), &Options::default()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "data segment 1: only active segments of memory 0 are merged"
    );
}
