//! The admin kubeconfig the server writes into its data dir once it serves (YAML, atomically replaced).

use base64::Engine;

/// The cluster, user and context name in the kubeconfig.
pub const CONTEXT_NAME: &str = "kcm";

/// Renders a kubeconfig for `server` (a URL) with the admin `token` and, for HTTPS, the CA.
pub fn render(server: &str, token: &str, ca_pem: Option<&str>) -> String {
    render_with_client_cert(server, token, ca_pem, None)
}

/// [`render`] with the admin's client certificate and key (PEM) as well, as kind's and
/// kubeadm's admin kubeconfigs carry.
pub fn render_with_client_cert(
    server: &str,
    token: &str,
    ca_pem: Option<&str>,
    client: Option<(&str, &str)>,
) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let ca_line = match ca_pem {
        Some(pem) => format!("    certificate-authority-data: {}\n", b64(pem)),
        None => String::new(),
    };
    let client_lines = match client {
        Some((cert, key)) => format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(cert),
            b64(key)
        ),
        None => String::new(),
    };
    format!(
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: {CONTEXT_NAME}\n  \
           cluster:\n    \
             server: {server}\n\
         {ca_line}\
         users:\n\
         - name: {CONTEXT_NAME}-admin\n  \
           user:\n\
         {client_lines}    \
             token: {token}\n\
         contexts:\n\
         - name: {CONTEXT_NAME}\n  \
           context:\n    \
             cluster: {CONTEXT_NAME}\n    \
             user: {CONTEXT_NAME}-admin\n    \
             namespace: default\n\
         current-context: {CONTEXT_NAME}\n\
         preferences: {{}}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_parseable_yaml() {
        let yaml = render(
            "https://127.0.0.1:6443",
            "abc123",
            Some("-----BEGIN CERTIFICATE-----\nx\n"),
        );
        let value: serde_json::Value = serde_saphyr::from_str(&yaml).expect("valid yaml");
        assert_eq!(
            value["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:6443"
        );
        assert_eq!(value["users"][0]["user"]["token"], "abc123");
        assert_eq!(value["current-context"], "kcm");
        assert_eq!(value["contexts"][0]["context"]["user"], "kcm-admin");
        assert!(value["clusters"][0]["cluster"]["certificate-authority-data"].is_string());
        assert!(
            value["users"][0]["user"]
                .get("client-certificate-data")
                .is_none()
        );
        let yaml = render_with_client_cert(
            "https://127.0.0.1:6443",
            "abc123",
            None,
            Some(("CERT", "KEY")),
        );
        let value: serde_json::Value = serde_saphyr::from_str(&yaml).expect("valid yaml");
        assert_eq!(
            value["users"][0]["user"]["client-certificate-data"],
            "Q0VSVA=="
        );
        assert_eq!(value["users"][0]["user"]["client-key-data"], "S0VZ");
        assert_eq!(value["users"][0]["user"]["token"], "abc123");
    }
}
