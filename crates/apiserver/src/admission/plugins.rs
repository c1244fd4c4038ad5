//! The admission plugins by name: upstream's `AllOrderedPlugins` order, the default-on set, and `--enable-admission-plugins` / `--disable-admission-plugins`.
//!
//! As upstream's `pkg/kubeapiserver/options/plugins.go` and the generic `AdmissionOptions`:
//! the enabled set is the default-on plugins plus the enabled ones minus the disabled ones,
//! always run in the recommended order whatever order the flags list them in. Names kcm does
//! not implement are accepted as upstream's names: off by default they stay off; enabled
//! explicitly they are an error, so a cluster never silently runs without a plugin it asked for.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::admission::interfaces::Plugin;

/// Errors of the admission configuration.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// A flag names a plugin upstream does not have.
    #[error("{flag} plugin {name:?} is unknown")]
    Unknown {
        /// `enable-admission-plugins` or `disable-admission-plugins`.
        flag: &'static str,
        /// The name given.
        name: String,
    },
    /// The same plugin is both enabled and disabled.
    #[error("{names:?} in enable-admission-plugins and disable-admission-plugins overlapped")]
    Overlap {
        /// The names in both lists, sorted.
        names: Vec<String>,
    },
    /// An upstream plugin kcm does not implement was enabled explicitly.
    #[error("admission plugin {name:?} is not implemented by kcm")]
    NotImplemented {
        /// The plugin's name.
        name: String,
    },
}

/// `NamespaceLifecycle`.
pub const NAMESPACE_LIFECYCLE: &str = "NamespaceLifecycle";
/// `LimitRanger`.
pub const LIMIT_RANGER: &str = "LimitRanger";
/// `ServiceAccount`.
pub const SERVICE_ACCOUNT: &str = "ServiceAccount";
/// `TaintNodesByCondition`.
pub const TAINT_NODES_BY_CONDITION: &str = "TaintNodesByCondition";
/// `PodSecurity`.
pub const POD_SECURITY: &str = "PodSecurity";
/// `Priority`.
pub const PRIORITY: &str = "Priority";
/// `DefaultTolerationSeconds`.
pub const DEFAULT_TOLERATION_SECONDS: &str = "DefaultTolerationSeconds";
/// `DefaultStorageClass`.
pub const DEFAULT_STORAGE_CLASS: &str = "DefaultStorageClass";
/// `StorageObjectInUseProtection`.
pub const STORAGE_OBJECT_IN_USE_PROTECTION: &str = "StorageObjectInUseProtection";
/// `PersistentVolumeClaimResize`.
pub const PERSISTENT_VOLUME_CLAIM_RESIZE: &str = "PersistentVolumeClaimResize";
/// `RuntimeClass`.
pub const RUNTIME_CLASS: &str = "RuntimeClass";
/// `ValidatingAdmissionPolicy`.
pub const VALIDATING_ADMISSION_POLICY: &str = crate::admission::validating_policy::NAME;
/// `MutatingAdmissionPolicy`.
pub const MUTATING_ADMISSION_POLICY: &str = crate::admission::mutating_policy::NAME;
/// `MutatingAdmissionWebhook`.
pub const MUTATING_ADMISSION_WEBHOOK: &str = "MutatingAdmissionWebhook";
/// `ValidatingAdmissionWebhook`.
pub const VALIDATING_ADMISSION_WEBHOOK: &str = "ValidatingAdmissionWebhook";
/// `ResourceQuota`: run by the registry itself after the chain's validating phase (it
/// charges quotas in the store, which a [`Plugin`] cannot), but switched like the others.
pub const RESOURCE_QUOTA: &str = "ResourceQuota";

/// Plugins the registry runs outside the chain: enabled and disabled by the same flags.
pub const REGISTRY_PLUGINS: &[&str] = &[RESOURCE_QUOTA];

/// Every upstream plugin, in the order they run (upstream's `AllOrderedPlugins`): webhooks,
/// ResourceQuota and AlwaysDeny last.
pub const ALL_ORDERED_PLUGINS: &[&str] = &[
    "AlwaysAdmit",
    "NamespaceAutoProvision",
    NAMESPACE_LIFECYCLE,
    "NamespaceExists",
    "LimitPodHardAntiAffinityTopology",
    LIMIT_RANGER,
    SERVICE_ACCOUNT,
    "NodeRestriction",
    TAINT_NODES_BY_CONDITION,
    "AlwaysPullImages",
    "ImagePolicyWebhook",
    POD_SECURITY,
    "PodNodeSelector",
    PRIORITY,
    DEFAULT_TOLERATION_SECONDS,
    "PodTolerationRestriction",
    "EventRateLimit",
    "ExtendedResourceToleration",
    DEFAULT_STORAGE_CLASS,
    STORAGE_OBJECT_IN_USE_PROTECTION,
    "OwnerReferencesPermissionEnforcement",
    PERSISTENT_VOLUME_CLAIM_RESIZE,
    RUNTIME_CLASS,
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DenyServiceExternalIPs",
    "PodTopologyLabels",
    MUTATING_ADMISSION_POLICY,
    MUTATING_ADMISSION_WEBHOOK,
    VALIDATING_ADMISSION_POLICY,
    VALIDATING_ADMISSION_WEBHOOK,
    RESOURCE_QUOTA,
    "AlwaysDeny",
];

/// The plugins upstream enables by default (the complement of `DefaultOffAdmissionPlugins`).
pub const DEFAULT_ON_PLUGINS: &[&str] = &[
    NAMESPACE_LIFECYCLE,
    LIMIT_RANGER,
    SERVICE_ACCOUNT,
    DEFAULT_STORAGE_CLASS,
    PERSISTENT_VOLUME_CLAIM_RESIZE,
    DEFAULT_TOLERATION_SECONDS,
    MUTATING_ADMISSION_WEBHOOK,
    VALIDATING_ADMISSION_WEBHOOK,
    RESOURCE_QUOTA,
    STORAGE_OBJECT_IN_USE_PROTECTION,
    PRIORITY,
    TAINT_NODES_BY_CONDITION,
    RUNTIME_CLASS,
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    POD_SECURITY,
    "PodTopologyLabels",
    MUTATING_ADMISSION_POLICY,
    VALIDATING_ADMISSION_POLICY,
];

/// The plugin called `name`, or `None` when kcm does not implement it.
pub fn build(name: &str) -> Option<Arc<dyn Plugin>> {
    use crate::admission::*;
    let plugin: Arc<dyn Plugin> = match name {
        NAMESPACE_LIFECYCLE => Arc::new(namespace_lifecycle::NamespaceLifecycle),
        LIMIT_RANGER => Arc::new(limit_ranger::LimitRanger),
        SERVICE_ACCOUNT => Arc::new(service_account::ServiceAccount::default()),
        TAINT_NODES_BY_CONDITION => Arc::new(taint_nodes_by_condition::TaintNodesByCondition),
        POD_SECURITY => Arc::new(pod_security::PodSecurity),
        PRIORITY => Arc::new(priority::Priority),
        DEFAULT_TOLERATION_SECONDS => {
            Arc::new(default_toleration_seconds::DefaultTolerationSeconds::default())
        }
        DEFAULT_STORAGE_CLASS => Arc::new(default_storage_class::DefaultStorageClass),
        STORAGE_OBJECT_IN_USE_PROTECTION => {
            Arc::new(storage_object_in_use_protection::StorageObjectInUseProtection)
        }
        PERSISTENT_VOLUME_CLAIM_RESIZE => {
            Arc::new(persistent_volume_claim_resize::PersistentVolumeClaimResize)
        }
        RUNTIME_CLASS => Arc::new(runtime_class::RuntimeClass),
        VALIDATING_ADMISSION_POLICY => {
            Arc::new(validating_policy::ValidatingAdmissionPolicy::default())
        }
        MUTATING_ADMISSION_POLICY => Arc::new(mutating_policy::MutatingAdmissionPolicy::default()),
        MUTATING_ADMISSION_WEBHOOK => Arc::new(webhook::MutatingWebhook::default()),
        VALIDATING_ADMISSION_WEBHOOK => Arc::new(webhook::ValidatingWebhook::default()),
        _ => return None,
    };
    Some(plugin)
}

/// `--enable-admission-plugins` and `--disable-admission-plugins`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdmissionConfig {
    /// Plugins enabled in addition to the default-on ones.
    pub enable: Vec<String>,
    /// Plugins turned off (default-on ones included).
    pub disable: Vec<String>,
}

impl AdmissionConfig {
    /// A configuration from the two flags' comma-separated values (empty items ignored).
    pub fn from_flags(enable: &[String], disable: &[String]) -> Self {
        let split = |values: &[String]| -> Vec<String> {
            values
                .iter()
                .flat_map(|v| v.split(','))
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
                .collect()
        };
        Self {
            enable: split(enable),
            disable: split(disable),
        }
    }

    /// This configuration with `names` also disabled.
    pub fn disabling(mut self, names: &[&str]) -> Self {
        self.disable.extend(names.iter().map(|n| (*n).to_owned()));
        self
    }

    /// Checks the names, as upstream's `AdmissionOptions.Validate`.
    pub fn validate(&self) -> Result<(), Error> {
        for (flag, names) in [
            ("enable-admission-plugins", &self.enable),
            ("disable-admission-plugins", &self.disable),
        ] {
            if let Some(name) = names
                .iter()
                .find(|n| !ALL_ORDERED_PLUGINS.contains(&n.as_str()))
            {
                return Err(Error::Unknown {
                    flag,
                    name: name.clone(),
                });
            }
        }
        let enabled: BTreeSet<&String> = self.enable.iter().collect();
        let overlap: Vec<String> = self
            .disable
            .iter()
            .filter(|n| enabled.contains(n))
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if !overlap.is_empty() {
            return Err(Error::Overlap { names: overlap });
        }
        Ok(())
    }

    /// The names of the enabled plugins in run order (upstream's `enabledPluginNames`).
    pub fn enabled_names(&self) -> Vec<&'static str> {
        ALL_ORDERED_PLUGINS
            .iter()
            .copied()
            .filter(|name| {
                let explicit = self.enable.iter().any(|n| n == name);
                let disabled = self.disable.iter().any(|n| n == name);
                explicit || (DEFAULT_ON_PLUGINS.contains(name) && !disabled)
            })
            .collect()
    }

    /// The enabled plugins kcm implements, in run order; an explicitly enabled plugin kcm
    /// does not implement is an error.
    pub fn plugins(&self) -> Result<Vec<Arc<dyn Plugin>>, Error> {
        self.validate()?;
        let mut plugins = Vec::new();
        for name in self.enabled_names() {
            match build(name) {
                Some(plugin) => plugins.push(plugin),
                None if REGISTRY_PLUGINS.contains(&name) => {}
                None if self.enable.iter().any(|n| n == name) => {
                    return Err(Error::NotImplemented {
                        name: name.to_owned(),
                    });
                }
                None => tracing::debug!(plugin = name, "admission plugin not implemented; off"),
            }
        }
        Ok(plugins)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(config: &AdmissionConfig) -> Vec<&'static str> {
        config
            .plugins()
            .expect("valid")
            .iter()
            .map(|p| p.name())
            .collect()
    }

    #[test]
    fn resource_quota_is_switched_by_the_flags_though_the_registry_runs_it() {
        use crate::admission::Chain;
        let on =
            |config: AdmissionConfig| Chain::from_config(&config).expect("valid").resource_quota();
        assert!(on(AdmissionConfig::default()));
        assert!(on(AdmissionConfig::from_flags(
            &[RESOURCE_QUOTA.to_owned()],
            &[]
        )));
        assert!(!on(AdmissionConfig::from_flags(
            &[],
            &[RESOURCE_QUOTA.to_owned()]
        )));
    }

    #[test]
    fn the_default_chain_runs_in_upstreams_order() {
        assert_eq!(
            names(&AdmissionConfig::default()),
            [
                NAMESPACE_LIFECYCLE,
                LIMIT_RANGER,
                SERVICE_ACCOUNT,
                TAINT_NODES_BY_CONDITION,
                POD_SECURITY,
                PRIORITY,
                DEFAULT_TOLERATION_SECONDS,
                DEFAULT_STORAGE_CLASS,
                STORAGE_OBJECT_IN_USE_PROTECTION,
                PERSISTENT_VOLUME_CLAIM_RESIZE,
                RUNTIME_CLASS,
                MUTATING_ADMISSION_POLICY,
                MUTATING_ADMISSION_WEBHOOK,
                VALIDATING_ADMISSION_POLICY,
                VALIDATING_ADMISSION_WEBHOOK,
            ]
        );
    }

    #[test]
    fn flags_enable_and_disable_by_name_in_any_order() {
        let config = AdmissionConfig::from_flags(
            &["StorageObjectInUseProtection".to_owned()],
            &["Priority,ServiceAccount".to_owned(), String::new()],
        );
        let got = names(&config);
        assert!(!got.contains(&PRIORITY));
        assert!(!got.contains(&SERVICE_ACCOUNT));
        let at = |n| got.iter().position(|g| *g == n).expect("enabled");
        assert!(at(DEFAULT_STORAGE_CLASS) < at(STORAGE_OBJECT_IN_USE_PROTECTION));
        assert!(at(STORAGE_OBJECT_IN_USE_PROTECTION) < at(RUNTIME_CLASS));
    }

    #[test]
    fn bad_flags_are_refused_with_upstreams_messages() {
        struct Case {
            name: &'static str,
            enable: &'static str,
            disable: &'static str,
            want: &'static str,
        }
        let cases = [
            Case {
                name: "unknown enable",
                enable: "Nope",
                disable: "",
                want: "enable-admission-plugins plugin \"Nope\" is unknown",
            },
            Case {
                name: "unknown disable",
                enable: "",
                disable: "Nope",
                want: "disable-admission-plugins plugin \"Nope\" is unknown",
            },
            Case {
                name: "overlap",
                enable: "LimitRanger,Priority",
                disable: "Priority,LimitRanger",
                want: "[\"LimitRanger\", \"Priority\"] in enable-admission-plugins and disable-admission-plugins overlapped",
            },
            Case {
                name: "not implemented",
                enable: "AlwaysPullImages",
                disable: "",
                want: "admission plugin \"AlwaysPullImages\" is not implemented by kcm",
            },
        ];
        for case in cases {
            let config =
                AdmissionConfig::from_flags(&[case.enable.to_owned()], &[case.disable.to_owned()]);
            let err = config.plugins().map(|_| ()).expect_err(case.name);
            assert_eq!(err.to_string(), case.want, "{}", case.name);
        }
    }
}
