//! The HTTPS client that calls webhooks: TLS trusting the configuration's `caBundle` (rustls), one HTTP/1.1 POST per call (hyper), the response body bounded; as upstream's `util/webhook` client, without connection reuse.

use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::admission::webhook::verifier::BundleVerifier;

/// Why a call did not produce a response body (each is an `ErrCallingWebhook` upstream).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The `caBundle` is not base64 PEM certificates.
    #[error("invalid caBundle: {0}")]
    CaBundle(String),
    /// The TLS configuration could not be built.
    #[error("TLS configuration: {0}")]
    Tls(#[source] rustls::Error),
    /// The server name to verify is not a DNS name or IP address.
    #[error("invalid server name {0:?}")]
    ServerName(String),
    /// Connecting, the TLS handshake, or the HTTP exchange failed.
    #[error("Post \"{url}\": {reason}")]
    Transport {
        /// The URL called (with its `timeout` parameter).
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// The webhook answered with a non-2xx status.
    #[error(
        "the server responded with the status code {code} but did not return more information (post {url})"
    )]
    Status {
        /// The URL called.
        url: String,
        /// The HTTP status code.
        code: u16,
    },
    /// The response body is larger than the bound.
    #[error("Post \"{url}\": the response body exceeds {limit} bytes")]
    TooLarge {
        /// The URL called.
        url: String,
        /// The bound.
        limit: usize,
    },
}

/// Where one call goes: the address to connect to, the name the certificate must carry, and
/// the request line.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// Host (DNS name or IP, IPv6 without brackets) to connect to.
    pub host: String,
    /// Port to connect to.
    pub port: u16,
    /// The name the serving certificate is verified against (`<svc>.<ns>.svc` for a service).
    pub server_name: String,
    /// The `Host` header.
    pub authority: String,
    /// Path and query of the request, `timeout` parameter included.
    pub path_and_query: String,
}

impl Endpoint {
    /// The URL called, for error messages.
    pub fn url(&self) -> String {
        format!("https://{}{}", self.authority, self.path_and_query)
    }
}

/// The TLS configuration trusting `ca_bundle` (base64 of PEM certificates, as the API's
/// `caBundle` bytes serialize; a self-signed certificate of the bundle may also serve as
/// itself, see [`BundleVerifier`]); with no bundle, the system's roots.
pub fn tls_config(ca_bundle: Option<&str>) -> Result<Arc<rustls::ClientConfig>, Error> {
    let mut roots = rustls::RootCertStore::empty();
    let mut bundle = Vec::new();
    match ca_bundle.filter(|b| !b.is_empty()) {
        Some(b64) => {
            let pem = base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|e| Error::CaBundle(e.to_string()))?;
            for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
                let cert = cert.map_err(|e| Error::CaBundle(e.to_string()))?;
                roots
                    .add(cert.clone())
                    .map_err(|e| Error::CaBundle(e.to_string()))?;
                bundle.push(cert);
            }
            if roots.is_empty() {
                return Err(Error::CaBundle("no certificate found".to_owned()));
            }
        }
        None => {
            // Upstream trusts the system roots when no bundle is given.
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(Error::Tls)?;
    if roots.is_empty() {
        // No system roots either: nothing verifies, every call fails its handshake.
        return Ok(Arc::new(
            builder.with_root_certificates(roots).with_no_client_auth(),
        ));
    }
    let webpki =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| Error::CaBundle(e.to_string()))?;
    let verifier = Arc::new(BundleVerifier::new(webpki, bundle));
    Ok(Arc::new(
        builder
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth(),
    ))
}

/// A failed connect as Go's dialer words it (`connect: connection refused`), so a webhook
/// call that cannot connect reads as kube-apiserver's; other errors keep their own text.
fn dial_error(e: &std::io::Error) -> std::borrow::Cow<'static, str> {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::ConnectionRefused => "connect: connection refused".into(),
        ErrorKind::HostUnreachable => "connect: no route to host".into(),
        ErrorKind::NetworkUnreachable => "connect: network is unreachable".into(),
        ErrorKind::TimedOut => "i/o timeout".into(),
        _ => e.to_string().into(),
    }
}

/// POSTs `body` (JSON) to `endpoint` and returns the response body, at most `limit` bytes.
/// The caller bounds the time taken (the webhook's `timeoutSeconds`).
pub async fn post(
    endpoint: &Endpoint,
    tls: Arc<rustls::ClientConfig>,
    body: Vec<u8>,
    limit: usize,
) -> Result<Bytes, Error> {
    let transport = |reason: String| Error::Transport {
        url: endpoint.url(),
        reason,
    };
    let server_name = ServerName::try_from(endpoint.server_name.clone())
        .map_err(|_| Error::ServerName(endpoint.server_name.clone()))?;
    let tcp = TcpStream::connect((endpoint.host.as_str(), endpoint.port))
        .await
        .map_err(|e| {
            transport(format!(
                "dial tcp {}:{}: {}",
                endpoint.host,
                endpoint.port,
                dial_error(&e)
            ))
        })?;
    let stream = TlsConnector::from(tls)
        .connect(server_name, tcp)
        .await
        .map_err(|e| transport(format!("tls: {e}")))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| transport(e.to_string()))?;
    let request = http::Request::post(endpoint.path_and_query.as_str())
        .header(http::header::HOST, endpoint.authority.as_str())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json, */*")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| transport(e.to_string()))?;
    let exchange = async move {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| transport(e.to_string()))?;
        // Dropping the sender lets the connection close once the body is read.
        drop(sender);
        let status = response.status();
        let collected = Limited::new(response.into_body(), limit)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    Error::TooLarge {
                        url: endpoint.url(),
                        limit,
                    }
                } else {
                    transport(e.to_string())
                }
            })?;
        if !status.is_success() {
            return Err(Error::Status {
                url: endpoint.url(),
                code: status.as_u16(),
            });
        }
        Ok(collected.to_bytes())
    };
    // The connection is driven beside the exchange (no task is spawned, so nothing outlives
    // a call cancelled by its timeout).
    let (result, _) = tokio::join!(exchange, connection);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_ca_bundle_is_an_error_not_a_panic() {
        for bundle in ["%%%", "aGVsbG8="] {
            let err = tls_config(Some(bundle)).expect_err(bundle);
            assert!(err.to_string().starts_with("invalid caBundle: "), "{err}");
        }
    }

    #[test]
    fn a_generated_ca_is_trusted() {
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["webhook.test".to_owned()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        let b64 = base64::engine::general_purpose::STANDARD.encode(cert.pem());
        assert!(tls_config(Some(&b64)).is_ok());
    }

    #[tokio::test]
    async fn a_refused_connection_names_the_url() {
        // Bind then drop a listener: its port refuses connections.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        let endpoint = Endpoint {
            host: "127.0.0.1".to_owned(),
            port,
            server_name: "127.0.0.1".to_owned(),
            authority: format!("127.0.0.1:{port}"),
            path_and_query: "/validate?timeout=10s".to_owned(),
        };
        let tls = tls_config(None).expect("tls");
        let err = post(&endpoint, tls, b"{}".to_vec(), 1024)
            .await
            .expect_err("refused");
        assert_eq!(
            err.to_string(),
            format!(
                "Post \"https://127.0.0.1:{port}/validate?timeout=10s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
            )
        );
    }
}
