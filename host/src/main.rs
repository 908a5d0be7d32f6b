use clap::Parser;

/// mimalloc returns freed pages to the OS; with glibc's malloc the host's RSS stayed at its
/// peak after the objects were gone (docs/benchmarks.md, "Memory").
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    orchard::cli::Args::parse().run().await
}
