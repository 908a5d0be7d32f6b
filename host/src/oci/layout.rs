//! The CNCF Wasm OCI artifact layout
//! (tag-runtime.cncf.io/wgs/wasm/deliverables/wasm-oci-artifact): an image manifest whose config
//! is `application/vnd.wasm.config.v0+json` and whose one layer is `application/wasm`.
//! wkg, wash and oras users push this; Kubewarden-era artifacts use the older layer type,
//! which is accepted on pull.

use oci_client::manifest::{OciDescriptor, OciImageManifest};
use serde::{Deserialize, Serialize};

use super::Error;

/// Config media type of the CNCF layout.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// Layer media type of the CNCF layout.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// Layer media type of the older wasm-to-oci convention (accepted on pull).
pub const LEGACY_WASM_LAYER_MEDIA_TYPE: &str = "application/vnd.wasm.content.layer.v1+wasm";
/// Config media type of the older convention (accepted with the older layer only).
pub const LEGACY_WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v1+json";

/// The one Wasm layer of `manifest`, or why it has none.
pub fn wasm_layer<'m>(
    reference: &str,
    manifest: &'m OciImageManifest,
) -> Result<&'m OciDescriptor, Error> {
    let layout = |reason: String| Error::Layout {
        reference: reference.to_owned(),
        reason,
    };
    let [layer] = manifest.layers.as_slice() else {
        return Err(layout(format!(
            "expected exactly one layer, found {}",
            manifest.layers.len()
        )));
    };
    let config = manifest.config.media_type.as_str();
    match (config, layer.media_type.as_str()) {
        (WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE | LEGACY_WASM_LAYER_MEDIA_TYPE)
        | (LEGACY_WASM_CONFIG_MEDIA_TYPE, LEGACY_WASM_LAYER_MEDIA_TYPE) => Ok(layer),
        (WASM_CONFIG_MEDIA_TYPE | LEGACY_WASM_CONFIG_MEDIA_TYPE, other) => Err(layout(format!(
            "layer media type {other:?} is not {WASM_LAYER_MEDIA_TYPE:?}"
        ))),
        (other, _) => Err(layout(format!(
            "config media type {other:?} is not {WASM_CONFIG_MEDIA_TYPE:?}"
        ))),
    }
}

/// The config blob of the CNCF layout (`application/vnd.wasm.config.v0+json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    /// RFC 3339 creation time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Who built the artifact.
    pub author: Option<String>,
    /// Always `wasm`.
    #[serde(default)]
    pub architecture: String,
    /// `wasip2` for a component.
    #[serde(default)]
    pub os: String,
    /// Digests of the layers (keeps config digests unique per artifact).
    #[serde(default)]
    pub layer_digests: Vec<String>,
    /// What the component exports and imports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<ComponentWorld>,
}

/// The world of a component as the config records it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentWorld {
    /// Exported interfaces and functions (`orchard:actuator/actuator@0.1.2`).
    #[serde(default)]
    pub exports: Vec<String>,
    /// Imported interfaces.
    #[serde(default)]
    pub imports: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The compilation target (e.g. `wasip2`), when set.
    pub target: Option<String>,
}

impl WasmConfig {
    /// The config of `component` (whose layer digest is `layer_digest`).
    pub fn for_component(component: &[u8], layer_digest: &str) -> Self {
        Self {
            created: Some(jiff::Timestamp::now().to_string()),
            author: None,
            architecture: "wasm".to_owned(),
            os: "wasip2".to_owned(),
            layer_digests: vec![layer_digest.to_owned()],
            component: ComponentWorld::of(component),
        }
    }

    /// Parses a config blob of `media_type`. The older convention's config is usually `{}`.
    pub fn parse(reference: &str, media_type: &str, bytes: &[u8]) -> Result<Self, Error> {
        if media_type == LEGACY_WASM_CONFIG_MEDIA_TYPE {
            // Nothing in the older convention's config is required; tools wrote `{}` or
            // their own fields, so one that does not read is an empty config.
            return Ok(serde_json::from_slice(bytes).unwrap_or_default());
        }
        serde_json::from_slice(bytes).map_err(|e| Error::Layout {
            reference: reference.to_owned(),
            reason: format!("config is not a {WASM_CONFIG_MEDIA_TYPE} document: {e}"),
        })
    }

    /// The config as pushed.
    ///
    /// # Panics
    ///
    /// Never: a struct of strings and vectors always serialises.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Invariant: a struct of strings and vectors always serialises.
        #[allow(clippy::expect_used)]
        serde_json::to_vec(self).expect("WasmConfig serialises")
    }
}

impl ComponentWorld {
    /// The top-level imports and exports of a component (`None` for a core module or bytes
    /// that do not parse: the runtime reports those when it loads them).
    pub fn of(bytes: &[u8]) -> Option<Self> {
        use wasmparser::{Encoding, Parser, Payload};
        let mut world = Self::default();
        let mut depth = 0usize;
        for payload in Parser::new(0).parse_all(bytes) {
            match payload.ok()? {
                Payload::Version { encoding, .. } => {
                    if depth == 0 && encoding != Encoding::Component {
                        return None;
                    }
                    depth += 1;
                }
                Payload::End(_) => depth = depth.saturating_sub(1),
                Payload::ComponentImportSection(section) if depth == 1 => {
                    for import in section {
                        world.imports.push(import.ok()?.name.name.to_owned());
                    }
                }
                Payload::ComponentExportSection(section) if depth == 1 => {
                    for export in section {
                        world.exports.push(export.ok()?.name.name.to_owned());
                    }
                }
                _ => {}
            }
        }
        Some(world)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(config: &str, layers: &[&str]) -> OciImageManifest {
        OciImageManifest {
            config: OciDescriptor {
                media_type: config.to_owned(),
                ..OciDescriptor::default()
            },
            layers: layers
                .iter()
                .map(|m| OciDescriptor {
                    media_type: (*m).to_owned(),
                    ..OciDescriptor::default()
                })
                .collect(),
            ..OciImageManifest::default()
        }
    }

    #[test]
    fn the_cncf_layout_and_the_older_layer_type_are_accepted() {
        for (config, layer) in [
            (WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE),
            (WASM_CONFIG_MEDIA_TYPE, LEGACY_WASM_LAYER_MEDIA_TYPE),
            (LEGACY_WASM_CONFIG_MEDIA_TYPE, LEGACY_WASM_LAYER_MEDIA_TYPE),
        ] {
            let m = manifest(config, &[layer]);
            assert_eq!(
                wasm_layer("r", &m).map(|l| l.media_type.clone()).ok(),
                Some(layer.to_owned())
            );
        }
    }

    #[test]
    fn container_images_and_multi_layer_artifacts_are_refused_with_the_reason() {
        let image = manifest(
            "application/vnd.oci.image.config.v1+json",
            &["application/vnd.oci.image.layer.v1.tar+gzip"],
        );
        let err = wasm_layer("reg/img:1", &image)
            .map(drop)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("reg/img:1") && err.contains("config media type"),
            "{err}"
        );

        let two = manifest(
            WASM_CONFIG_MEDIA_TYPE,
            &[WASM_LAYER_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE],
        );
        let err = wasm_layer("r", &two).map(drop).unwrap_err().to_string();
        assert!(err.contains("exactly one layer, found 2"), "{err}");

        let tar = manifest(
            WASM_CONFIG_MEDIA_TYPE,
            &["application/vnd.oci.image.layer.v1.tar"],
        );
        let err = wasm_layer("r", &tar).map(drop).unwrap_err().to_string();
        assert!(err.contains("layer media type"), "{err}");
    }

    #[test]
    fn a_config_round_trips_with_the_cncf_field_names() {
        let config = WasmConfig {
            created: Some("2026-11-29T00:00:00Z".into()),
            architecture: "wasm".into(),
            os: "wasip2".into(),
            layer_digests: vec!["sha256:00".into()],
            component: Some(ComponentWorld {
                exports: vec!["orchard:actuator/actuator@0.1.0".into()],
                imports: vec![],
                target: None,
            }),
            ..WasmConfig::default()
        };
        let json: serde_json::Value = serde_json::from_slice(&config.to_bytes()).unwrap();
        assert_eq!(json["layerDigests"][0], "sha256:00");
        assert_eq!(
            json["component"]["exports"][0],
            "orchard:actuator/actuator@0.1.0"
        );
        let back = WasmConfig::parse("r", WASM_CONFIG_MEDIA_TYPE, &config.to_bytes()).unwrap();
        assert_eq!(back, config);
    }

    #[test]
    fn a_core_module_has_no_component_world() {
        // `(module)`: magic + version 1.
        assert_eq!(ComponentWorld::of(b"\0asm\x01\0\0\0"), None);
        assert_eq!(ComponentWorld::of(b"not wasm"), None);
    }
}
