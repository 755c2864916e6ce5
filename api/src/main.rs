use std::io::IsTerminal;

use clap::Parser;

/// mimalloc: under signed order entry glibc malloc took a fifth of the server's CPU (issue 27;
/// the load tool's figures are in benches/README.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PERPSIM_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    let cli = perpsim_api::cli::Cli::parse();
    match perpsim_api::cli::run(cli) {
        Ok(code) => std::process::exit(code),
        Err(message) => {
            eprintln!("perpsim: {message}");
            std::process::exit(2);
        }
    }
}
