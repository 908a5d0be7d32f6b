//! The harness's command line: bad input is refused, naming what is wrong, before anything
//! starts (no test environment, no output directory). Also the test target that makes
//! `cargo test --no-run` build the two binaries with the tests' dependency features, so that
//! `bench/run.sh --dev` (the throughput smoke of `make test`) compiles nothing again.

use std::process::Command;

/// Runs `command`, which must end in a usage error (clap's exit code 2): its stderr.
fn usage_error(command: &mut Command) -> std::io::Result<String> {
    let run = command.output()?;
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert_eq!(run.status.code(), Some(2), "a usage error: {stderr}");
    Ok(stderr)
}

#[test]
fn an_unknown_contender_is_refused_by_name_before_any_environment_is_needed() -> std::io::Result<()>
{
    let out = std::env::temp_dir().join(format!("orchard-throughput-cli-{}", std::process::id()));
    let stderr = usage_error(
        Command::new(env!("CARGO_BIN_EXE_orchard-throughput"))
            .args([
                "--contenders",
                "orchard-component,kopf-expret",
                "--orchard-bin",
                "orchard",
            ])
            .args(["--plugin-dir", "plugins", "--out"])
            .arg(&out)
            .env_remove("KUBECONFIG"),
    )?;
    assert!(
        stderr.contains("'kopf-expret'"),
        "names the bad value: {stderr}"
    );
    assert!(
        stderr.contains("kopf-expert") && stderr.contains("floor"),
        "lists the contenders: {stderr}"
    );
    assert!(
        !stderr.contains("KUBECONFIG"),
        "refused before the environment is read: {stderr}"
    );
    assert!(!out.exists(), "no output directory for a refused run");
    Ok(())
}

#[test]
fn the_floor_refuses_to_start_without_its_powerdns_settings_naming_them() -> std::io::Result<()> {
    let stderr = usage_error(
        Command::new(env!("CARGO_BIN_EXE_orchard-floor"))
            .args(["--namespace", "bench", "--health-addr", "127.0.0.1:0"])
            .env_remove("PDNS_API_URL")
            .env_remove("PDNS_API_KEY"),
    )?;
    assert!(
        stderr.contains("--pdns-url") && stderr.contains("--pdns-key"),
        "names both: {stderr}"
    );
    Ok(())
}
