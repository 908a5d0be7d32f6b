//! The start-up shim: the WASI preview-1 imports a module's start-up may call while it is
//! pre-initialised, answered as the host answers a fresh instance of a plugin (through the
//! component's preview-1 adapter) — so that what the snapshot keeps is what a start-up in the
//! host would have computed:
//!
//! | import | answer |
//! |---|---|
//! | `args_sizes_get`, `args_get`, `environ_sizes_get`, `environ_get` | none (the host passes no arguments; the environment it gives an instance, the call deadline, is the instance's: the Go SDK's resume reads it) |
//! | `clock_time_get` | realtime: now; monotonic: 1 ns, then 1 ns more at each reading (the instance's own clock starts at 0 when it is made, so it reads later than the build's start-up did; Go refuses a reading of 0) |
//! | `random_get` | the build machine's entropy (what is frozen by it, the SDK reseeds in each instance) |
//! | `fd_fdstat_get` | stdin, stdout, stderr: not a terminal (file type unknown), blocking; other descriptors: `EBADF` |
//! | `fd_fdstat_set_flags` | `EINVAL` (stdio stays blocking, as in the host) |
//! | `fd_prestat_get` | `EBADF` (no preopened directories) |
//! | `fd_write` | stdout and stderr to this tool's stderr (a start-up's panic shows in the build log) |
//! | `sched_yield` | done |
//! | `proc_exit` | the run fails with the code |
//!
//! Every other import fails the run, naming it: a start-up that opens files, sleeps, or calls
//! the host's interfaces cannot be pre-initialised (its answer would be frozen into every
//! instance).

use std::io::{Read, Write};

use wasmtime::{Caller, Engine, Linker, Memory, Module};

const WASI: &str = "wasi_snapshot_preview1";
const ERRNO_BADF: i32 = 8;
const ERRNO_INVAL: i32 = 28;
const CLOCK_REALTIME: i32 = 0;
const CLOCK_MONOTONIC: i32 = 1;

/// The store's state while the start-up runs.
#[derive(Debug)]
pub struct Shim {
    /// The monotonic clock's next reading, in nanoseconds.
    monotonic: u64,
}

impl Default for Shim {
    fn default() -> Self {
        Self { monotonic: 1 }
    }
}

/// A linker answering `module`'s imports: the shim's, and a trap naming the import for the
/// rest.
pub fn linker(engine: &Engine, module: &Module) -> wasmtime::Result<Linker<Shim>> {
    let mut linker = Linker::new(engine);
    linker.define_unknown_imports_as_traps(module)?;
    linker.allow_shadowing(true);
    linker.func_wrap(WASI, "args_sizes_get", none)?;
    linker.func_wrap(WASI, "environ_sizes_get", none)?;
    linker.func_wrap(WASI, "args_get", |_: Caller<'_, Shim>, _: i32, _: i32| 0)?;
    linker.func_wrap(WASI, "environ_get", |_: Caller<'_, Shim>, _: i32, _: i32| 0)?;
    linker.func_wrap(WASI, "clock_time_get", clock_time_get)?;
    linker.func_wrap(WASI, "random_get", random_get)?;
    linker.func_wrap(WASI, "fd_fdstat_get", fd_fdstat_get)?;
    linker.func_wrap(
        WASI,
        "fd_fdstat_set_flags",
        |_: Caller<'_, Shim>, _: i32, _: i32| ERRNO_INVAL,
    )?;
    linker.func_wrap(
        WASI,
        "fd_prestat_get",
        |_: Caller<'_, Shim>, _: i32, _: i32| ERRNO_BADF,
    )?;
    linker.func_wrap(WASI, "fd_write", fd_write)?;
    linker.func_wrap(WASI, "sched_yield", |_: Caller<'_, Shim>| 0)?;
    linker.func_wrap(
        WASI,
        "proc_exit",
        |_: Caller<'_, Shim>, code: i32| -> wasmtime::Result<()> {
            wasmtime::bail!("the start-up exited (proc_exit {code})")
        },
    )?;
    Ok(linker)
}

/// The module's memory (`memory`), which every preview-1 import writes its results to.
fn memory(caller: &mut Caller<'_, Shim>) -> wasmtime::Result<Memory> {
    match caller.get_export("memory") {
        Some(wasmtime::Extern::Memory(memory)) => Ok(memory),
        _ => wasmtime::bail!("the module exports no memory `memory` for WASI's results"),
    }
}

/// A guest address (an i32 of the ABI, unsigned).
#[allow(clippy::cast_sign_loss, reason = "a memory32 address")]
fn address(pointer: i32) -> usize {
    pointer as u32 as usize
}

/// `args_sizes_get` / `environ_sizes_get`: zero of each.
fn none(mut caller: Caller<'_, Shim>, count: i32, size: i32) -> wasmtime::Result<i32> {
    let memory = memory(&mut caller)?;
    memory.write(&mut caller, address(count), &0u32.to_le_bytes())?;
    memory.write(&mut caller, address(size), &0u32.to_le_bytes())?;
    Ok(0)
}

fn clock_time_get(
    mut caller: Caller<'_, Shim>,
    id: i32,
    _precision: i64,
    time: i32,
) -> wasmtime::Result<i32> {
    let now = match id {
        CLOCK_REALTIME => {
            let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
            u64::try_from(since_epoch.as_nanos())?
        }
        CLOCK_MONOTONIC => {
            let shim = caller.data_mut();
            let now = shim.monotonic;
            shim.monotonic += 1;
            now
        }
        _ => return Ok(ERRNO_INVAL),
    };
    let memory = memory(&mut caller)?;
    memory.write(&mut caller, address(time), &now.to_le_bytes())?;
    Ok(0)
}

fn random_get(mut caller: Caller<'_, Shim>, buf: i32, len: i32) -> wasmtime::Result<i32> {
    let mut bytes = vec![0u8; usize::try_from(len)?];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    let memory = memory(&mut caller)?;
    memory.write(&mut caller, address(buf), &bytes)?;
    Ok(0)
}

fn fd_fdstat_get(mut caller: Caller<'_, Shim>, fd: i32, stat: i32) -> wasmtime::Result<i32> {
    if !(0..=2).contains(&fd) {
        return Ok(ERRNO_BADF);
    }
    // fdstat: filetype u8 (0: unknown), flags u16 at 2 (none: blocking), rights u64 at 8 and 16.
    let mut fdstat = [0u8; 24];
    fdstat[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    fdstat[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    let memory = memory(&mut caller)?;
    memory.write(&mut caller, address(stat), &fdstat)?;
    Ok(0)
}

fn fd_write(
    mut caller: Caller<'_, Shim>,
    fd: i32,
    iovs: i32,
    count: i32,
    written: i32,
) -> wasmtime::Result<i32> {
    if fd != 1 && fd != 2 {
        return Ok(ERRNO_BADF);
    }
    let memory = memory(&mut caller)?;
    let mut total = 0u32;
    let mut stderr = std::io::stderr().lock();
    for i in 0..usize::try_from(count)? {
        let mut iov = [0u8; 8];
        memory.read(&caller, address(iovs) + i * 8, &mut iov)?;
        let [p0, p1, p2, p3, l0, l1, l2, l3] = iov;
        let (pointer, len) = (
            u32::from_le_bytes([p0, p1, p2, p3]),
            u32::from_le_bytes([l0, l1, l2, l3]),
        );
        let mut bytes = vec![0u8; len as usize];
        memory.read(&caller, pointer as usize, &mut bytes)?;
        stderr.write_all(&bytes)?;
        total += len;
    }
    memory.write(&mut caller, address(written), &total.to_le_bytes())?;
    Ok(0)
}
