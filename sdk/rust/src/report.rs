//! What a plugin reports beside its answers (`orchard:actuator/report`, WIT 0.1.1): connection
//! details and drifts.
//!
//! - [`connection_detail`]: a secret value of the resource (a generated password, an endpoint,
//!   a token), from `create` or a reconciler. The host writes the details of a pass into the
//!   Secret named by `spec.writeConnectionSecretTo.name` (owned by the object), never into
//!   status, Events or logs.
//! - [`drift`] / [`sensitive_drift`]: a field a reconciler found different from the spec and
//!   changed back, with its observed and desired values (JSON, serialised here). The host
//!   records the drifts of a pass in an Event `DriftCorrected` and in `status.drift`.
//! - [`Diff`] / [`diff`]: compares observed and desired field by field, then reports every
//!   difference in one call (`Diff::report`), after the change succeeded:
//!
//! ```
//! use orchard_sdk::report::Diff;
//! let diff = Diff::new().field("kind", "Native", "Master").field("account", "a", "a");
//! assert_eq!(diff.fields(), ["kind"]);
//! // … change the resource back, then:
//! diff.report();
//! ```
//!
//! Built natively (unit tests, a host linking the actuator through [`crate::Raw`]) nothing is
//! sent anywhere: reports are kept in a collector of the calling thread, which [`take`] empties
//! (at most [`NATIVE_LIMIT`] of each kind are kept; later ones are dropped).

use serde::Serialize;
use serde_json::Value;

/// One drift: a field a reconciler changed back to the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    /// The field, e.g. `kind` or `settings.ttl`.
    pub field: String,
    /// Its value before the change, as JSON text (`None`: absent).
    pub observed: Option<String>,
    /// Its value in the spec, as JSON text (`None`: absent).
    pub desired: Option<String>,
    /// Whether the host masks the values.
    pub sensitive: bool,
}

/// Reports a connection detail: `key` is a Secret data key (`[-._a-zA-Z0-9]+`, at most 253
/// characters); a later value of a key replaces an earlier one.
pub fn connection_detail(key: &str, value: impl AsRef<[u8]>) {
    send_detail(key, value.as_ref());
}

/// Reports a drift of `field`: its `observed` value, changed back to the `desired` one (`None`:
/// absent). Values are serialised to JSON here (a value that does not serialise is sent as
/// absent).
pub fn drift<T: Serialize + ?Sized>(field: &str, observed: Option<&T>, desired: Option<&T>) {
    send_drift(Drift {
        field: field.to_owned(),
        observed: observed.and_then(to_json),
        desired: desired.and_then(to_json),
        sensitive: false,
    });
}

/// [`drift`] of a secret field: the host masks both values.
pub fn sensitive_drift<T: Serialize + ?Sized>(
    field: &str,
    observed: Option<&T>,
    desired: Option<&T>,
) {
    send_drift(Drift {
        field: field.to_owned(),
        observed: observed.and_then(to_json),
        desired: desired.and_then(to_json),
        sensitive: true,
    });
}

fn to_json<T: Serialize + ?Sized>(value: &T) -> Option<String> {
    serde_json::to_string(value).ok()
}

/// The differences between observed and desired values, field by field; reported by
/// [`Diff::report`] (nothing is sent before).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use = "a Diff reports nothing until `report()`"]
pub struct Diff {
    drifts: Vec<Drift>,
}

impl Diff {
    /// No differences yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `field` when `observed != desired`.
    #[allow(
        clippy::needless_pass_by_value,
        reason = "by value, so that `field(\"ttl\", 60, 300)` and `field(\"kind\", &a, &b)` both read well"
    )]
    pub fn field<O, D>(self, field: &str, observed: O, desired: D) -> Self
    where
        O: Serialize + PartialEq<D>,
        D: Serialize,
    {
        self.push(field, &observed, &desired, false)
    }

    /// Adds `field` whatever its values: for a comparison of your own (case-insensitive,
    /// unordered…).
    pub fn changed<O, D>(mut self, field: &str, observed: &O, desired: &D) -> Self
    where
        O: Serialize + ?Sized,
        D: Serialize + ?Sized,
    {
        self.drifts.push(Drift {
            field: field.to_owned(),
            observed: to_json(observed),
            desired: to_json(desired),
            sensitive: false,
        });
        self
    }

    /// [`Diff::field`] of a secret field: the host masks both values.
    #[allow(
        clippy::needless_pass_by_value,
        reason = "by value, so that `field(\"ttl\", 60, 300)` and `field(\"kind\", &a, &b)` both read well"
    )]
    pub fn sensitive<O, D>(self, field: &str, observed: O, desired: D) -> Self
    where
        O: Serialize + PartialEq<D>,
        D: Serialize,
    {
        self.push(field, &observed, &desired, true)
    }

    fn push<O, D>(mut self, field: &str, observed: &O, desired: &D, sensitive: bool) -> Self
    where
        O: Serialize + PartialEq<D>,
        D: Serialize,
    {
        if *observed != *desired {
            self.drifts.push(Drift {
                field: field.to_owned(),
                observed: to_json(observed),
                desired: to_json(desired),
                sensitive,
            });
        }
        self
    }

    /// Whether observed and desired agree on every field.
    pub fn is_empty(&self) -> bool {
        self.drifts.is_empty()
    }

    /// The names of the fields that differ, in order.
    pub fn fields(&self) -> Vec<&str> {
        self.drifts.iter().map(|d| d.field.as_str()).collect()
    }

    /// The differences, in order.
    pub fn drifts(&self) -> &[Drift] {
        &self.drifts
    }

    /// Reports every difference as a drift; returns how many.
    #[allow(
        clippy::must_use_candidate,
        reason = "the count is a convenience; reporting is the point"
    )]
    pub fn report(self) -> usize {
        let n = self.drifts.len();
        self.drifts.into_iter().for_each(send_drift);
        n
    }
}

/// Compares `observed` and `desired` (JSON objects) on each of `fields`, a dotted path into
/// nested objects (`settings.ttl`); a field missing on one side is absent there. Reports
/// nothing: call [`Diff::report`] once the resource was changed back.
pub fn diff(observed: &Value, desired: &Value, fields: &[&str]) -> Diff {
    let mut drifts = Vec::new();
    for field in fields {
        let (o, d) = (lookup(observed, field), lookup(desired, field));
        if o != d {
            drifts.push(Drift {
                field: (*field).to_owned(),
                observed: o.map(Value::to_string),
                desired: d.map(Value::to_string),
                sensitive: false,
            });
        }
    }
    Diff { drifts }
}

fn lookup<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(value, |v, key| v.get(key))
}

#[cfg(target_arch = "wasm32")]
fn send_detail(key: &str, value: &[u8]) {
    crate::bindings::orchard::actuator::report::connection_detail(key, value);
}

#[cfg(target_arch = "wasm32")]
#[allow(
    clippy::needless_pass_by_value,
    reason = "the native twin keeps the drift"
)]
fn send_drift(d: Drift) {
    crate::bindings::orchard::actuator::report::drift(
        &d.field,
        d.observed.as_deref(),
        d.desired.as_deref(),
        d.sensitive,
    );
}

/// How many connection details, and how many drifts, the native collector keeps per thread.
pub const NATIVE_LIMIT: usize = 1024;

/// What was reported on this thread since the last [`take`] (native builds only).
#[cfg(not(target_arch = "wasm32"))]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reports {
    /// `(key, value)`, in the order reported.
    pub connection_details: Vec<(String, Vec<u8>)>,
    /// In the order reported.
    pub drifts: Vec<Drift>,
}

#[cfg(not(target_arch = "wasm32"))]
impl Reports {
    /// Whether nothing was reported.
    pub fn is_empty(&self) -> bool {
        self.connection_details.is_empty() && self.drifts.is_empty()
    }

    /// The last value reported for `key` (as the host keeps it), as text.
    pub fn detail(&self, key: &str) -> Option<String> {
        self.connection_details
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }

    /// The fields of the drifts, in order.
    pub fn drift_fields(&self) -> Vec<&str> {
        self.drifts.iter().map(|d| d.field.as_str()).collect()
    }
}

#[cfg(not(target_arch = "wasm32"))]
thread_local! {
    static COLLECTED: std::cell::RefCell<Reports> = std::cell::RefCell::default();
}

/// Empties this thread's collector and returns what it held (native builds only).
#[cfg(not(target_arch = "wasm32"))]
pub fn take() -> Reports {
    COLLECTED.with(std::cell::RefCell::take)
}

#[cfg(not(target_arch = "wasm32"))]
fn send_detail(key: &str, value: &[u8]) {
    COLLECTED.with_borrow_mut(|r| {
        if r.connection_details.len() < NATIVE_LIMIT {
            r.connection_details.push((key.to_owned(), value.to_vec()));
        }
    });
}

#[cfg(not(target_arch = "wasm32"))]
fn send_drift(d: Drift) {
    COLLECTED.with_borrow_mut(|r| {
        if r.drifts.len() < NATIVE_LIMIT {
            r.drifts.push(d);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn drift_of(field: &str, o: Option<&str>, d: Option<&str>, sensitive: bool) -> Drift {
        Drift {
            field: field.into(),
            observed: o.map(Into::into),
            desired: d.map(Into::into),
            sensitive,
        }
    }

    #[test]
    fn reports_are_collected_natively_and_taken_once() {
        connection_detail("password", b"s3cret");
        connection_detail("username", "bob");
        connection_detail("password", vec![b's', b'2']);
        drift("kind", Some("Native"), Some("Master"));
        drift::<u32>("ttl", None, Some(&60));
        sensitive_drift("password", Some("a"), Some("b"));
        let got = take();
        assert_eq!(got.detail("password").as_deref(), Some("s2"));
        assert_eq!(got.detail("username").as_deref(), Some("bob"));
        assert_eq!(got.connection_details.len(), 3);
        assert_eq!(
            got.drifts,
            [
                drift_of("kind", Some(r#""Native""#), Some(r#""Master""#), false),
                drift_of("ttl", None, Some("60"), false),
                drift_of("password", Some(r#""a""#), Some(r#""b""#), true),
            ]
        );
        assert!(take().is_empty());
    }

    #[test]
    fn a_diff_keeps_differences_and_reports_them_on_demand() {
        let diff = Diff::new()
            .field("kind", "Native", "Master")
            .field("account", "a", "a")
            .field("nameservers", vec!["ns1."], vec!["ns1.", "ns2."])
            .sensitive("apiKey", "x", "y")
            .changed("records", &["b", "a"], &["a", "b"]);
        assert_eq!(diff.fields(), ["kind", "nameservers", "apiKey", "records"]);
        assert!(take().drifts.is_empty(), "nothing before report()");
        assert_eq!(diff.report(), 4);
        let got = take();
        assert_eq!(
            got.drift_fields(),
            ["kind", "nameservers", "apiKey", "records"]
        );
        assert_eq!(got.drifts[1].desired.as_deref(), Some(r#"["ns1.","ns2."]"#));
        assert!(got.drifts[2].sensitive);
        assert!(Diff::new().field("a", 1, 1).is_empty());
    }

    #[test]
    fn diff_of_json_follows_dotted_paths_and_absence() {
        let observed = json!({"kind": "Native", "settings": {"ttl": 60}, "extra": 1});
        let desired = json!({"kind": "Native", "settings": {"ttl": 300}, "account": "a"});
        let d = diff(
            &observed,
            &desired,
            &["kind", "settings.ttl", "account", "extra", "none"],
        );
        assert_eq!(
            d.drifts(),
            [
                drift_of("settings.ttl", Some("60"), Some("300"), false),
                drift_of("account", None, Some(r#""a""#), false),
                drift_of("extra", Some("1"), None, false),
            ]
        );
    }

    #[test]
    fn the_native_collector_is_bounded() {
        for i in 0..NATIVE_LIMIT + 5 {
            drift("f", Some(&i), None);
        }
        assert_eq!(take().drifts.len(), NATIVE_LIMIT);
    }
}
