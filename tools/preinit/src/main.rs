//! `orchard-preinit <in.wasm> -o <out.wasm>`: see the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Pre-initialises a core WebAssembly module: runs its start-up once and writes a module that
/// starts from the state the start-up left (sdk/go/build.sh runs it on Go plugins).
#[derive(Debug, Parser)]
#[command(name = "orchard-preinit", version)]
struct Args {
    /// The core module (.wasm).
    input: PathBuf,
    /// Where to write the pre-initialised module.
    #[arg(short, long)]
    output: PathBuf,
    /// The export that is the start-up: run once here, then removed.
    #[arg(long, default_value = "_initialize")]
    init: String,
    /// An export to become the result's `_initialize`: run once in each instance, first.
    #[arg(long)]
    resume: Option<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("orchard-preinit: {}: {error}", args.input.display());
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let wasm = std::fs::read(&args.input)?;
    let options = orchard_preinit::Options {
        init: args.init.clone(),
        resume: args.resume.clone(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let out = runtime.block_on(orchard_preinit::preinit(&wasm, &options))?;
    std::fs::write(&args.output, out)
        .map_err(|e| format!("writing {}: {e}", args.output.display()))?;
    Ok(())
}
