//! Where the API server is: `--kubeconfig`, `--master`, or the in-cluster service account.

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};

use super::error::{Error, Result};

/// Builds the client configuration as client-go's `clientcmd.BuildConfigFromFlags`:
/// - `--kubeconfig` given: its current context, with the server replaced by `--master` if set;
/// - only `--master`: that URL, without credentials;
/// - neither: the in-cluster configuration (service account token, `KUBERNETES_SERVICE_HOST`).
pub async fn load_client_config(
    kubeconfig: Option<&Path>,
    master: Option<&str>,
) -> Result<kube::Config> {
    let master_url = master
        .filter(|m| !m.is_empty())
        .map(|m| {
            m.parse::<http::Uri>().map_err(|e| Error::ClientConfig {
                source_desc: "--master".to_owned(),
                message: format!("{m:?} is not a URL: {e}"),
            })
        })
        .transpose()?;
    match (kubeconfig, master_url) {
        (Some(path), master_url) => {
            let error = |message: String| Error::ClientConfig {
                source_desc: path.display().to_string(),
                message,
            };
            let file = Kubeconfig::read_from(path).map_err(|e| error(e.to_string()))?;
            let mut config =
                kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                    .await
                    .map_err(|e| error(e.to_string()))?;
            if let Some(url) = master_url {
                config.cluster_url = url;
            }
            Ok(config)
        }
        (None, Some(url)) => Ok(kube::Config::new(url)),
        (None, None) => {
            tracing::warn!(
                "Neither --kubeconfig nor --master was specified. Using the inClusterConfig."
            );
            kube::Config::incluster().map_err(|e| Error::ClientConfig {
                source_desc: "the in-cluster service account".to_owned(),
                message: format!("{e} (outside a cluster, pass --kubeconfig or --master)"),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = r#"
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://10.0.0.1:6443
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: secret-token
contexts:
- name: test
  context:
    cluster: test
    user: admin
current-context: test
"#;

    #[tokio::test]
    async fn kubeconfig_with_and_without_master_override() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, KUBECONFIG).expect("write");

        let config = load_client_config(Some(&path), None).await.expect("load");
        assert_eq!(config.cluster_url.to_string(), "https://10.0.0.1:6443/");
        assert!(config.accept_invalid_certs);

        let config = load_client_config(Some(&path), Some("https://192.168.1.1:443"))
            .await
            .expect("load");
        assert_eq!(
            config.cluster_url.authority().map(|a| a.as_str()),
            Some("192.168.1.1:443")
        );
    }

    #[tokio::test]
    async fn master_alone_and_errors() {
        let config = load_client_config(None, Some("http://127.0.0.1:8080"))
            .await
            .expect("master only");
        assert_eq!(config.cluster_url.port_u16(), Some(8080));

        let err = load_client_config(Some(Path::new("/nonexistent/kubeconfig")), None)
            .await
            .expect_err("missing file");
        assert!(err.to_string().contains("/nonexistent/kubeconfig"), "{err}");

        let err = load_client_config(None, Some("not a url"))
            .await
            .expect_err("bad master");
        assert!(err.to_string().contains("--master"), "{err}");
    }
}
