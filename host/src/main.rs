use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    orchard::cli::Args::parse().run().await
}
