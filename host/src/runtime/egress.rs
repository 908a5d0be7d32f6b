//! Outbound HTTP policy: the `WasiHttpHooks` through which every request of a plugin goes.
//!
//! Restrictive by default: an empty allow-list denies everything. A denied request fails in
//! the guest with `HttpRequestDenied` (the SDKs turn it into a clear failure) and is logged
//! here with the plugin's name.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Limited};
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An allow-list entry that is not `scheme://host[:port|:*]`.
    #[error(
        "invalid allowed host {entry:?}: {reason} (expected scheme://host[:port], port may be *)"
    )]
    InvalidAllowedHost {
        /// The entry as configured.
        entry: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// One allow-list entry: `http://127.0.0.1:8081`, `https://api.example.com`,
/// `http://127.0.0.1:*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHost {
    /// `http` or `https`.
    pub scheme: String,
    /// Host name or IP address, compared exactly.
    pub host: String,
    /// `None` = any port.
    pub port: Option<u16>,
}

impl FromStr for AllowedHost {
    type Err = Error;

    fn from_str(entry: &str) -> Result<Self, Error> {
        let invalid = |reason| Error::InvalidAllowedHost {
            entry: entry.to_owned(),
            reason,
        };
        let (scheme, rest) = entry
            .split_once("://")
            .ok_or_else(|| invalid("no scheme"))?;
        let scheme = scheme.to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return Err(invalid("scheme must be http or https")),
        };
        let rest = rest.trim_end_matches('/');
        if rest.contains('/') {
            return Err(invalid("a path is not allowed"));
        }
        let (host, port) = match rest.rsplit_once(':') {
            Some((host, "*")) => (host, None),
            Some((host, port)) if !host.ends_with(']') || rest.starts_with('[') => {
                let port = port.parse().map_err(|_| invalid("port is not a number"))?;
                (host, Some(port))
            }
            _ => (rest, Some(default_port)),
        };
        if host.is_empty() {
            return Err(invalid("host is empty"));
        }
        Ok(Self {
            scheme,
            host: host.to_ascii_lowercase(),
            port,
        })
    }
}

impl AllowedHost {
    fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        self.scheme == scheme && self.host == host && self.port.is_none_or(|p| p == port)
    }
}

/// What a plugin may reach, and how long and how much it may receive.
#[derive(Debug, Clone)]
pub struct EgressPolicy {
    /// Destinations allowed. Default: none.
    pub allowed: Vec<AllowedHost>,
    /// Connect timeout. Default: 5 s.
    pub connect_timeout: Duration,
    /// Time to the response head, and between body frames. Default: 30 s.
    pub response_timeout: Duration,
    /// Largest response body accepted. Default: 8 MiB.
    pub max_response_bytes: usize,
}

impl Default for EgressPolicy {
    fn default() -> Self {
        Self {
            allowed: Vec::new(),
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(30),
            max_response_bytes: 8 << 20,
        }
    }
}

impl EgressPolicy {
    /// A policy allowing `entries` with default timeouts.
    pub fn allowing<I, S>(entries: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Ok(Self {
            allowed: entries
                .into_iter()
                .map(|e| e.as_ref().parse())
                .collect::<Result<_, _>>()?,
            ..Self::default()
        })
    }

    /// Whether a request to this URI may go out.
    pub fn allows(&self, uri: &http::Uri) -> bool {
        let Some(scheme) = uri.scheme_str() else {
            return false;
        };
        let Some(host) = uri.host() else {
            return false;
        };
        let port = uri
            .port_u16()
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        let host = host.to_ascii_lowercase();
        self.allowed.iter().any(|a| a.allows(scheme, &host, port))
    }
}

/// The hooks of one store: the plugin's policy and its name for logs.
pub(crate) struct EgressHooks {
    pub(crate) policy: Arc<EgressPolicy>,
    pub(crate) plugin: Arc<str>,
}

type SendFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ),
                HttpError,
            >,
        > + Send,
>;

impl WasiHttpHooks for EgressHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> SendFuture {
        let policy = Arc::clone(&self.policy);
        if !policy.allows(request.uri()) {
            tracing::warn!(plugin = %self.plugin, uri = %request.uri(), "outbound request denied by the allow-list (allow it with --allow-host, or spec.allowedHosts of the Plugin object)");
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        // The guest may ask for shorter timeouts, never longer ones.
        let shorter =
            |guest: Option<Duration>, ours: Duration| Some(guest.map_or(ours, |g| g.min(ours)));
        let options = RequestOptions {
            connect_timeout: shorter(
                options.and_then(|o| o.connect_timeout),
                policy.connect_timeout,
            ),
            first_byte_timeout: shorter(
                options.and_then(|o| o.first_byte_timeout),
                policy.response_timeout,
            ),
            between_bytes_timeout: shorter(
                options.and_then(|o| o.between_bytes_timeout),
                policy.response_timeout,
            ),
        };
        Box::new(async move {
            let (response, io) =
                wasmtime_wasi_http::default_send_request(request, Some(options)).await?;
            let cap = policy.max_response_bytes;
            let response = response.map(|body| {
                Limited::new(body, cap)
                    .map_err(move |e| match e.downcast::<HttpError>() {
                        Ok(e) => *e,
                        Err(_) => HttpError::HttpResponseBodySize(u64::try_from(cap).ok()),
                    })
                    .boxed_unsync()
            });
            Ok((
                response,
                Box::new(io) as Box<dyn Future<Output = Result<(), HttpError>> + Send>,
            ))
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "test code")]
mod tests {
    use super::*;

    fn uri(s: &str) -> http::Uri {
        s.parse().unwrap()
    }

    #[test]
    fn an_empty_policy_denies_everything() {
        assert!(!EgressPolicy::default().allows(&uri("http://127.0.0.1:8081/api")));
    }

    #[test]
    fn an_entry_allows_only_its_scheme_host_and_port() {
        let p = EgressPolicy::allowing(["http://127.0.0.1:8081"]).unwrap();
        assert!(p.allows(&uri("http://127.0.0.1:8081/api/v1/servers")));
        assert!(!p.allows(&uri("https://127.0.0.1:8081/")));
        assert!(!p.allows(&uri("http://127.0.0.1:8082/")));
        assert!(!p.allows(&uri("http://localhost:8081/")));
    }

    #[test]
    fn a_port_wildcard_allows_any_port_of_the_host() {
        let p = EgressPolicy::allowing(["http://127.0.0.1:*"]).unwrap();
        assert!(p.allows(&uri("http://127.0.0.1:1/")));
        assert!(p.allows(&uri("http://127.0.0.1/")));
        assert!(!p.allows(&uri("http://127.0.0.2:1/")));
    }

    #[test]
    fn an_entry_without_port_means_the_scheme_default() {
        let p = EgressPolicy::allowing(["https://API.example.com/"]).unwrap();
        assert!(p.allows(&uri("https://api.example.com/x")));
        assert!(!p.allows(&uri("https://api.example.com:8443/x")));
    }

    #[test]
    fn malformed_entries_are_rejected_with_the_entry_named() {
        for bad in [
            "127.0.0.1:80",
            "ftp://x",
            "http://",
            "http://x:port",
            "http://x/path",
        ] {
            let err = bad.parse::<AllowedHost>().unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
        }
    }
}
