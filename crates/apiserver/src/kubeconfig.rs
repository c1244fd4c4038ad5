//! The admin kubeconfig the server writes into its data dir once it serves (YAML, atomically replaced).

use base64::Engine;

/// The cluster, user and context name in the kubeconfig.
pub const CONTEXT_NAME: &str = "kcm";

/// Renders a kubeconfig for `server` (a URL) with the admin `token` and, for HTTPS, the CA.
pub fn render(server: &str, token: &str, ca_pem: Option<&str>) -> String {
    let ca_line = match ca_pem {
        Some(pem) => format!(
            "    certificate-authority-data: {}\n",
            base64::engine::general_purpose::STANDARD.encode(pem)
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
           user:\n    \
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
    }
}
