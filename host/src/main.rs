use std::process::ExitCode;

use clap::Parser;

/// mimalloc returns freed pages to the OS; with glibc's malloc the host's RSS stayed at its
/// peak after the objects were gone (docs/benchmarks.md, "Memory").
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = orchard::cli::Args::parse();
    match args.async_runtime() {
        Ok(runtime) => runtime.block_on(args.run()),
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}
