//! The ConfigMap saying since when legacy service account tokens are tracked, as kube-apiserver's `legacytokentracking` controller.
//!
//! The legacy token authenticator labels a token's Secret `kubernetes.io/legacy-token-last-used`
//! with the day of each use; `kube-system/kube-apiserver-legacy-service-account-token-tracking`
//! holds, under `since`, the first day this was done, so that the controller manager's legacy
//! token cleaner can tell "never used" from "not tracked yet". The server creates it with today's
//! date when it is missing, and rewrites a `since` that is not a `YYYY-MM-DD` day; a valid date
//! is never moved.

use std::time::Duration;

use serde_json::json;

use crate::error::Result;
use crate::registry::Registry;
use crate::registry::options::WriteOptions;
use crate::registry::update::Target;
use crate::resources::core::CONFIGMAPS;

/// The ConfigMap's name (upstream's `legacytokentracking.ConfigMapName`).
pub const TRACKING_CONFIG_MAP_NAME: &str = "kube-apiserver-legacy-service-account-token-tracking";
/// Its namespace.
pub const TRACKING_CONFIG_MAP_NAMESPACE: &str = "kube-system";
/// The data key of the first tracked day (`legacytokentracking.ConfigMapDataKey`).
pub const TRACKING_CONFIG_MAP_DATA_KEY: &str = "since";
/// How often the ConfigMap is checked again (upstream's creation rate limit, one per 30 min).
pub const TRACKING_RESYNC_INTERVAL: Duration = Duration::from_secs(30 * 60);
/// The field manager of the server's writes.
const FIELD_MANAGER: &str = "kube-apiserver";

impl Registry {
    /// Creates the tracking ConfigMap with `since` = `today` (`YYYY-MM-DD`, UTC) if missing, or
    /// sets `since` to `today` if it is not a day, as upstream's `syncConfigMap`. A concurrent
    /// create, update or delete by another server is not an error.
    pub async fn ensure_legacy_token_tracking(&self, today: &str) -> Result<()> {
        let Some(def) = self.served(&CONFIGMAPS) else {
            return Ok(());
        };
        let opts = WriteOptions {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..WriteOptions::default()
        };
        let ns = TRACKING_CONFIG_MAP_NAMESPACE;
        let Some((mut existing, _)) = self.get_kv(def, ns, TRACKING_CONFIG_MAP_NAME).await? else {
            let body = json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": TRACKING_CONFIG_MAP_NAME, "namespace": ns},
                "data": {TRACKING_CONFIG_MAP_DATA_KEY: today},
            });
            return match self.create(def, ns, body, &opts).await {
                Err(e) if e.reason == "AlreadyExists" => Ok(()),
                other => other.map(drop),
            };
        };
        let since = existing
            .pointer(&format!("/data/{TRACKING_CONFIG_MAP_DATA_KEY}"))
            .and_then(|v| v.as_str());
        if since.is_some_and(is_day) {
            return Ok(());
        }
        existing["data"] = match existing.get("data").filter(|d| d.is_object()) {
            Some(data) => data.clone(),
            None => json!({}),
        };
        existing["data"][TRACKING_CONFIG_MAP_DATA_KEY] = json!(today);
        match self
            .update(
                def,
                ns,
                TRACKING_CONFIG_MAP_NAME,
                existing,
                Target::Main,
                &opts,
            )
            .await
        {
            Err(e) if e.code == 404 || e.code == 409 => Ok(()),
            other => other.map(drop),
        }
    }
}

/// Whether `s` is a `YYYY-MM-DD` day as Go's `time.Parse("2006-01-02", s)` accepts it.
fn is_day(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
        && jiff::civil::Date::strptime("%Y-%m-%d", s).is_ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::storage::memory::MemoryStorage;

    async fn since(registry: &Registry) -> Option<String> {
        let cm = registry
            .get(
                &CONFIGMAPS,
                TRACKING_CONFIG_MAP_NAMESPACE,
                TRACKING_CONFIG_MAP_NAME,
            )
            .await
            .ok()?;
        cm.pointer("/data/since")
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    }

    #[tokio::test]
    async fn the_tracking_config_map_is_created_once_and_a_bad_date_is_mended() {
        let registry = Registry::new(Arc::new(MemoryStorage::new()));
        registry.ensure_default_namespaces().await.expect("ns");
        registry
            .ensure_legacy_token_tracking("2024-01-02")
            .await
            .expect("create");
        assert_eq!(since(&registry).await.as_deref(), Some("2024-01-02"));

        // A later day leaves a valid date alone.
        registry
            .ensure_legacy_token_tracking("2025-03-04")
            .await
            .expect("again");
        assert_eq!(since(&registry).await.as_deref(), Some("2024-01-02"));

        // A malformed date is replaced by today's, other keys kept.
        let mut cm = registry
            .get(
                &CONFIGMAPS,
                TRACKING_CONFIG_MAP_NAMESPACE,
                TRACKING_CONFIG_MAP_NAME,
            )
            .await
            .expect("get");
        cm["data"] = json!({"since": "2024-01-02-1", "other": "x"});
        registry
            .update(
                &CONFIGMAPS,
                TRACKING_CONFIG_MAP_NAMESPACE,
                TRACKING_CONFIG_MAP_NAME,
                cm,
                Target::Main,
                &WriteOptions::default(),
            )
            .await
            .expect("corrupt");
        registry
            .ensure_legacy_token_tracking("2025-03-04")
            .await
            .expect("mend");
        assert_eq!(since(&registry).await.as_deref(), Some("2025-03-04"));
        let cm = registry
            .get(
                &CONFIGMAPS,
                TRACKING_CONFIG_MAP_NAMESPACE,
                TRACKING_CONFIG_MAP_NAME,
            )
            .await
            .expect("get");
        assert_eq!(cm["data"]["other"], "x");
    }

    #[test]
    fn days_are_read_as_gos_date_layout() {
        assert!(is_day("2023-02-28"));
        for bad in ["2023-02-29", "2023-2-28", "2023-02-28-1", "", "20230228xx"] {
            assert!(!is_day(bad), "{bad:?}");
        }
    }
}
