//! Plugins as OCI artifacts, through the real tools: what `orchard plugin push` pushes, `oras`
//! pulls byte-identical; what `oras` pushes, Orchard pulls and runs; `cosign` signatures are
//! verified; a registry that requires a user is reached with the docker config; a blob
//! tampered with in the registry is refused.

use base64::Engine as _;
use orchard_e2e::oci::{Workdir, layer_digest, tamper_blob, with_custom_section};
use orchard_e2e::paths::plugin;
use orchard_e2e::{TestEnv, run, run_failing, sha256, unique_suffix};
use serde_json::Value;

const ACTUATOR_EXPORT: &str = "orchard:actuator/actuator@0.1.2";

fn echo() -> anyhow::Result<Vec<u8>> {
    Ok(std::fs::read(plugin("orchard-fixture-echo"))?)
}

#[tokio::test]
async fn what_orchard_pushes_oras_pulls_byte_identical_and_inspect_describes() -> anyhow::Result<()>
{
    let env = TestEnv::load()?;
    let wd = Workdir::new("push-then-oras")?;
    let component = echo()?;
    let file = wd.write("echo.wasm", &component)?;
    let repo = format!("{}/e2e/echo-{}", env.registry, unique_suffix());

    // Plain HTTP only for a registry marked insecure: unmarked, the loopback registry is
    // spoken to over HTTPS, which it does not serve.
    let refused = run_failing(
        wd.orchard(&env)
            .env_remove("ORCHARD_INSECURE_REGISTRIES")
            .args(["plugin", "push"])
            .arg(&file)
            .arg(format!("{repo}:v1")),
    )?;
    assert!(refused.contains(&format!("{repo}:v1")), "{refused}");

    let pinned = wd.push(&env, &file, &format!("{repo}:v1"))?;
    assert!(pinned.starts_with(&format!("{repo}@sha256:")), "{pinned}");

    // oras reads the manifest Orchard wrote: the CNCF layout, one layer, by tag.
    let manifest: Value = serde_json::from_str(&run(wd.oras().args([
        "manifest",
        "fetch",
        "--plain-http",
        &format!("{repo}:v1"),
    ]))?)?;
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(manifest["layers"].as_array().map(Vec::len), Some(1));
    assert_eq!(manifest["layers"][0]["mediaType"], "application/wasm");
    assert_eq!(manifest["layers"][0]["digest"], sha256(&component).as_str());

    // … and pulls the component, byte-identical.
    std::fs::create_dir_all(wd.path.join("oras-out"))?;
    run(wd
        .oras()
        .args(["pull", "--plain-http", &pinned, "-o", "oras-out"]))?;
    let pulled = std::fs::read(wd.path.join("oras-out/echo.wasm"))?;
    assert!(
        pulled == component,
        "oras pulled {} bytes that differ from the {} pushed",
        pulled.len(),
        component.len()
    );

    // inspect: digests, media types and the world the component exports.
    let inspect: Value = serde_json::from_str(&run(wd.orchard(&env).args([
        "plugin",
        "inspect",
        &format!("{repo}:v1"),
    ]))?)?;
    assert_eq!(inspect["reference"], pinned.as_str());
    assert_eq!(inspect["manifestDigest"].as_str(), pinned.split('@').nth(1));
    assert_eq!(
        inspect["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(inspect["config"]["content"]["os"], "wasip2");
    assert_eq!(inspect["layer"]["mediaType"], "application/wasm");
    assert_eq!(inspect["layer"]["digest"], sha256(&component).as_str());
    let exports: Vec<&str> = inspect["world"]["exports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    assert!(exports.contains(&ACTUATOR_EXPORT), "exports: {exports:?}");
    assert_eq!(
        inspect["config"]["content"]["component"]["exports"],
        inspect["world"]["exports"]
    );
    Ok(())
}

#[tokio::test]
async fn what_oras_pushes_orchard_pulls_and_runs_in_both_layer_conventions() -> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let wd = Workdir::new("oras-then-pull")?;
    let component = echo()?;
    wd.write("echo.wasm", &component)?;
    wd.write("config.json", br#"{"architecture":"wasm","os":"wasip2"}"#)?;
    wd.write("legacy.json", b"{}")?;
    wd.write("notes.txt", b"not a component")?;
    let repo = format!("{}/e2e/oras-{}", env.registry, unique_suffix());

    for (tag, config, layer) in [
        (
            "cncf",
            "config.json:application/vnd.wasm.config.v0+json",
            "echo.wasm:application/wasm",
        ),
        (
            "legacy",
            "legacy.json:application/vnd.wasm.config.v1+json",
            "echo.wasm:application/vnd.wasm.content.layer.v1+wasm",
        ),
    ] {
        let reference = format!("{repo}:{tag}");
        run(wd.oras().args([
            "push",
            "--plain-http",
            &reference,
            "--config",
            config,
            layer,
        ]))?;
        let out = format!("pulled-{tag}.wasm");
        let pinned = run(wd
            .orchard(&env)
            .args(["plugin", "pull", &reference, "-o", &out]))?;
        assert!(
            pinned.trim().starts_with(&format!("{repo}@sha256:")),
            "{pinned}"
        );
        assert!(
            std::fs::read(wd.path.join(&out))? == component,
            "{tag}: bytes differ"
        );
        // Orchard runs what it pulled.
        let described: Value = serde_json::from_str(&run(wd
            .orchard(&env)
            .arg("describe")
            .arg(wd.path.join(&out)))?)?;
        assert_eq!(described["name"], "echo", "{tag}");
    }

    // Something that is not a Wasm artifact is refused, naming the reference and the reason.
    let reference = format!("{repo}:text");
    run(wd
        .oras()
        .args(["push", "--plain-http", &reference, "notes.txt:text/plain"]))?;
    let err = run_failing(
        wd.orchard(&env)
            .args(["plugin", "pull", &reference, "-o", "x.wasm"]),
    )?;
    assert!(
        err.contains("is not a Wasm artifact") && err.contains(&reference),
        "{err}"
    );
    assert!(
        !wd.path.join("x.wasm").exists(),
        "nothing is written on failure"
    );
    Ok(())
}

#[tokio::test]
async fn cosign_signatures_are_verified_and_unsigned_or_foreign_ones_refused() -> anyhow::Result<()>
{
    let env = TestEnv::load()?;
    let wd = Workdir::new("cosign")?;
    let trusted = wd.cosign_key_pair("trusted")?;
    let other = wd.cosign_key_pair("other")?;
    let repo = format!("{}/e2e/signed-{}", env.registry, unique_suffix());
    let signed = wd.push(
        &env,
        &wd.write("echo.wasm", &echo()?)?,
        &format!("{repo}:signed"),
    )?;
    wd.cosign_sign("trusted", &signed)?;

    let ok = run(wd
        .orchard(&env)
        .args(["plugin", "pull", &signed, "-o", "ok.wasm", "--verify-key"])
        .arg(&trusted))?;
    assert_eq!(ok.trim(), signed);
    let inspect: Value = serde_json::from_str(&run(wd
        .orchard(&env)
        .args([
            "plugin",
            "inspect",
            &format!("{repo}:signed"),
            "--verify-key",
        ])
        .arg(&trusted))?)?;
    assert_eq!(inspect["signature"], "verified");

    let foreign = run_failing(
        wd.orchard(&env)
            .args([
                "plugin",
                "pull",
                &signed,
                "-o",
                "foreign.wasm",
                "--verify-key",
            ])
            .arg(&other),
    )?;
    assert!(
        foreign.contains("signature verification failed")
            && foreign.contains("none of its 1 signature(s)"),
        "{foreign}"
    );

    let distinct = wd.write(
        "unsigned.wasm",
        &with_custom_section(&echo()?, &unique_suffix()),
    )?;
    let unsigned = wd.push(&env, &distinct, &format!("{repo}:unsigned"))?;
    let err = run_failing(
        wd.orchard(&env)
            .args([
                "plugin",
                "pull",
                &unsigned,
                "-o",
                "unsigned-out.wasm",
                "--verify-key",
            ])
            .arg(&trusted),
    )?;
    assert!(err.contains("is not signed"), "{err}");
    assert!(!wd.path.join("unsigned-out.wasm").exists());
    Ok(())
}

#[tokio::test]
async fn a_registry_that_requires_a_user_is_reached_with_the_docker_config() -> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let wd = Workdir::new("auth")?;
    let file = wd.write("echo.wasm", &echo()?)?;
    let reference = format!("{}/e2e/private-{}:v1", env.auth_registry, unique_suffix());

    let anonymous = run_failing(
        wd.orchard(&env)
            .args(["plugin", "push"])
            .arg(&file)
            .arg(&reference),
    )?;
    assert!(anonymous.contains(&reference), "{anonymous}");

    let encode = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let config = serde_json::json!({"auths": {
        env.auth_registry.clone(): {"auth": encode(&format!("{}:{}", env.auth_registry_user, env.auth_registry_password))}
    }});
    std::fs::create_dir_all(wd.path.join("docker"))?;
    std::fs::write(wd.path.join("docker/config.json"), config.to_string())?;

    let pinned = wd.push(&env, &file, &reference)?;
    run(wd
        .orchard(&env)
        .args(["plugin", "pull", &pinned, "-o", "back.wasm"]))?;
    assert!(std::fs::read(wd.path.join("back.wasm"))? == std::fs::read(&file)?);
    Ok(())
}

#[tokio::test]
async fn a_blob_tampered_with_in_the_registry_is_refused_as_a_digest_mismatch() -> anyhow::Result<()>
{
    let env = TestEnv::load()?;
    let wd = Workdir::new("tamper")?;
    let distinct = wd.write(
        "tampered.wasm",
        &with_custom_section(&echo()?, &unique_suffix()),
    )?;
    let pinned = wd.push(
        &env,
        &distinct,
        &format!("{}/e2e/tamper-{}:v1", env.registry, unique_suffix()),
    )?;
    tamper_blob(&env, &layer_digest(&env, &pinned).await?)?;
    let err = run_failing(
        wd.orchard(&env)
            .args(["plugin", "pull", &pinned, "-o", "t.wasm"]),
    )?;
    assert!(err.contains("digest mismatch for layer"), "{err}");
    assert!(!wd.path.join("t.wasm").exists());
    Ok(())
}
