//! The controller registry: name → init function, aliases, on/off by default (upstream's
//! `ControllerDescriptor` map).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::context::ControllerContext;
use super::error::{BoxError, RegistryError};
use super::selection::{ControllerSelection, UnknownControllers};

/// What an init function hands back for a controller it started: the future running it until
/// [`ControllerContext::cancel`] fires, and an optional health check.
pub struct StartedController {
    /// Runs the controller; must return soon after the context's token is cancelled, once its
    /// workers have finished the items they hold.
    pub(crate) run: BoxFuture<'static, ()>,
    /// Extra check for `/healthz` and `/readyz`, besides "the controller is running".
    pub(crate) check: Option<HealthCheckFn>,
}

/// A health check: `Ok` when healthy, otherwise the reason (logged, not served).
pub type HealthCheckFn = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

impl StartedController {
    /// A controller run by `run`. The manager spawns it only after every controller has been
    /// built, the informer factory started and its caches synced.
    pub fn new(run: impl Future<Output = ()> + Send + 'static) -> Self {
        Self {
            run: Box::pin(run),
            check: None,
        }
    }

    /// Adds a health check of the controller's own (served under its name).
    pub fn with_health_check(
        mut self,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.check = Some(Arc::new(check));
        self
    }
}

impl std::fmt::Debug for StartedController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartedController")
            .field("check", &self.check.is_some())
            .finish_non_exhaustive()
    }
}

/// The future an init function returns: `Ok(None)` when the controller decided not to run
/// (upstream's `enabled == false`), an error when it could not be built (fatal for the manager).
pub type InitFuture = BoxFuture<'static, Result<Option<StartedController>, BoxError>>;

/// Builds a controller from the context, as upstream's `InitFunc`: requests the informers it
/// needs from [`ControllerContext::factory`] (this is how a controller declares them), registers
/// its handlers, and returns its run future. It must not start informers or workers itself.
pub type InitFn = Arc<dyn Fn(ControllerContext) -> InitFuture + Send + Sync>;

/// One controller the manager knows, as upstream's `ControllerDescriptor`.
#[derive(Clone)]
pub struct ControllerDescriptor {
    /// Canonical name, e.g. `replicaset-controller` (kube-controller-manager's `names` package).
    name: String,
    /// Older names accepted by `--controllers`, e.g. `replicaset`.
    aliases: Vec<String>,
    /// Runs with `*` only when named explicitly.
    disabled_by_default: bool,
    /// Its service account in `kube-system` under `--use-service-account-credentials`
    /// (`None`: it uses the manager's own client).
    service_account: Option<String>,
    /// Feature gates that must all be on for it to start (upstream's `requiredFeatureGates`).
    required_feature_gates: Vec<&'static str>,
    /// Builds the controller.
    init: InitFn,
}

impl std::fmt::Debug for ControllerDescriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerDescriptor")
            .field("name", &self.name)
            .field("aliases", &self.aliases)
            .field("disabled_by_default", &self.disabled_by_default)
            .field("service_account", &self.service_account)
            .field("required_feature_gates", &self.required_feature_gates)
            .finish_non_exhaustive()
    }
}

impl ControllerDescriptor {
    /// A controller called `name`, built by `init`.
    pub fn new<F, Fut>(name: impl Into<String>, init: F) -> Self
    where
        F: Fn(ControllerContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Option<StartedController>, BoxError>> + Send + 'static,
    {
        Self {
            name: name.into(),
            aliases: Vec::new(),
            disabled_by_default: false,
            service_account: None,
            required_feature_gates: Vec::new(),
            init: Arc::new(move |ctx| Box::pin(init(ctx))),
        }
    }

    /// Adds names `--controllers` also accepts for this controller.
    pub fn with_aliases(mut self, aliases: &[&str]) -> Self {
        self.aliases.extend(aliases.iter().map(|a| (*a).to_owned()));
        self
    }

    /// Names the service account (in `kube-system`) the controller's client authenticates as
    /// under `--use-service-account-credentials`, e.g. `replicaset-controller`; several
    /// controllers may share one (upstream's `ClientBuilder.ClientOrDie(name)`).
    pub fn with_service_account(mut self, name: &str) -> Self {
        self.service_account = Some(name.to_owned());
        self
    }

    /// Starts the controller only when every gate of `gates` is on (`--feature-gates`);
    /// otherwise the manager logs "Controller is disabled by a feature gate" and skips it.
    pub fn with_required_feature_gates(mut self, gates: &[&'static str]) -> Self {
        self.required_feature_gates.extend_from_slice(gates);
        self
    }

    /// The feature gates it requires.
    pub fn required_feature_gates(&self) -> &[&'static str] {
        &self.required_feature_gates
    }

    /// Makes `*` skip this controller; it runs only when named.
    pub fn disabled_by_default(mut self) -> Self {
        self.disabled_by_default = true;
        self
    }

    /// The canonical name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The aliases.
    pub fn aliases(&self) -> &[String] {
        &self.aliases
    }

    /// Whether `*` skips it.
    pub fn is_disabled_by_default(&self) -> bool {
        self.disabled_by_default
    }

    /// Its service account, if it names one.
    pub fn service_account(&self) -> Option<&str> {
        self.service_account.as_deref()
    }

    /// Calls the init function.
    pub(crate) fn init(&self, ctx: ControllerContext) -> InitFuture {
        (self.init)(ctx)
    }
}

/// Every controller the manager can run, by canonical name (iteration is in name order, so
/// start-up order is deterministic).
#[derive(Clone, Debug, Default)]
pub struct ControllerRegistry {
    /// Canonical name → descriptor.
    descriptors: BTreeMap<String, ControllerDescriptor>,
    /// Alias → canonical name. No alias is also a canonical name.
    aliases: HashMap<String, String>,
}

impl ControllerRegistry {
    /// An empty registry (tests and embedders register their own controllers).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `descriptor`, refusing empty or duplicate names and aliases.
    pub fn register(&mut self, descriptor: ControllerDescriptor) -> Result<(), RegistryError> {
        let name = descriptor.name.clone();
        if name.is_empty() {
            return Err(RegistryError::EmptyName);
        }
        if self.descriptors.contains_key(&name) || self.aliases.contains_key(&name) {
            return Err(RegistryError::DuplicateName(name));
        }
        for alias in &descriptor.aliases {
            if self.aliases.contains_key(alias)
                || self.descriptors.contains_key(alias)
                || *alias == name
            {
                return Err(RegistryError::DuplicateAlias {
                    controller: name,
                    alias: alias.clone(),
                });
            }
        }
        for alias in &descriptor.aliases {
            self.aliases.insert(alias.clone(), name.clone());
        }
        self.descriptors.insert(name, descriptor);
        Ok(())
    }

    /// [`Self::register`], builder style.
    pub fn with(mut self, descriptor: ControllerDescriptor) -> Result<Self, RegistryError> {
        self.register(descriptor)?;
        Ok(self)
    }

    /// Every canonical name (upstream's `KnownControllers`).
    pub fn known_names(&self) -> BTreeSet<String> {
        self.descriptors.keys().cloned().collect()
    }

    /// Alias → canonical name (upstream's `ControllerAliases`).
    pub fn aliases(&self) -> &HashMap<String, String> {
        &self.aliases
    }

    /// Canonical names skipped by `*`, sorted (upstream's `ControllersDisabledByDefault`).
    pub fn disabled_by_default(&self) -> Vec<String> {
        self.descriptors
            .values()
            .filter(|d| d.disabled_by_default)
            .map(|d| d.name.clone())
            .collect()
    }

    /// The descriptor of canonical `name`.
    pub fn get(&self, name: &str) -> Option<&ControllerDescriptor> {
        self.descriptors.get(name)
    }

    /// Every descriptor, in name order.
    pub fn iter(&self) -> impl Iterator<Item = &ControllerDescriptor> {
        self.descriptors.values()
    }

    /// Resolves a `--controllers` value against this registry.
    pub fn select<S: AsRef<str>>(
        &self,
        entries: &[S],
    ) -> Result<ControllerSelection, UnknownControllers> {
        ControllerSelection::resolve(entries, &self.known_names(), &self.aliases)
    }

    /// The descriptors `selection` enables, in name order.
    pub fn enabled<'a>(
        &'a self,
        selection: &'a ControllerSelection,
    ) -> impl Iterator<Item = &'a ControllerDescriptor> + 'a {
        self.iter()
            .filter(move |d| selection.is_enabled(&d.name, d.disabled_by_default))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noop(name: &str) -> ControllerDescriptor {
        ControllerDescriptor::new(name, |_ctx| async { Ok(None) })
    }

    #[test]
    fn registration_refuses_what_upstream_refuses() {
        struct Case {
            name: &'static str,
            second: ControllerDescriptor,
            want: RegistryError,
        }
        let cases = [
            Case {
                name: "empty name",
                second: noop(""),
                want: RegistryError::EmptyName,
            },
            Case {
                name: "same name twice",
                second: noop("replicaset-controller"),
                want: RegistryError::DuplicateName("replicaset-controller".into()),
            },
            Case {
                name: "name equal to an alias",
                second: noop("replicaset"),
                want: RegistryError::DuplicateName("replicaset".into()),
            },
            Case {
                name: "alias used twice",
                second: noop("other-controller").with_aliases(&["replicaset"]),
                want: RegistryError::DuplicateAlias {
                    controller: "other-controller".into(),
                    alias: "replicaset".into(),
                },
            },
            Case {
                name: "alias equal to a name",
                second: noop("other-controller").with_aliases(&["replicaset-controller"]),
                want: RegistryError::DuplicateAlias {
                    controller: "other-controller".into(),
                    alias: "replicaset-controller".into(),
                },
            },
        ];
        for case in cases {
            let mut registry = ControllerRegistry::new();
            registry
                .register(noop("replicaset-controller").with_aliases(&["replicaset"]))
                .expect("first");
            assert_eq!(
                registry.register(case.second),
                Err(case.want),
                "{}",
                case.name
            );
            assert_eq!(registry.known_names().len(), 1, "{}", case.name);
        }
    }

    #[test]
    fn builtin_registers_kube_controller_manager_names() {
        let registry = ControllerRegistry::builtin();
        let names: Vec<String> = registry.known_names().into_iter().collect();
        assert_eq!(
            names,
            vec![
                "bootstrap-signer-controller",
                "certificatesigningrequest-approving-controller",
                "certificatesigningrequest-cleaner-controller",
                "certificatesigningrequest-signing-controller",
                "cloud-node-lifecycle-controller",
                "clusterrole-aggregation-controller",
                "cronjob-controller",
                "daemonset-controller",
                "deployment-controller",
                "device-taint-eviction-controller",
                "disruption-controller",
                "endpoints-controller",
                "endpointslice-controller",
                "endpointslice-mirroring-controller",
                "ephemeral-volume-controller",
                "garbage-collector-controller",
                "horizontal-pod-autoscaler-controller",
                "job-controller",
                "kube-apiserver-serving-clustertrustbundle-publisher-controller",
                "legacy-serviceaccount-token-cleaner-controller",
                "namespace-controller",
                "node-ipam-controller",
                "node-lifecycle-controller",
                "node-route-controller",
                "persistentvolume-attach-detach-controller",
                "persistentvolume-binder-controller",
                "persistentvolume-expander-controller",
                "persistentvolume-protection-controller",
                "persistentvolumeclaim-protection-controller",
                "pod-garbage-collector-controller",
                "podcertificaterequest-cleaner-controller",
                "podgroup-protection-controller",
                "replicaset-controller",
                "replicationcontroller-controller",
                "resourceclaim-controller",
                "resourcepoolstatusrequest-controller",
                "resourcequota-controller",
                "root-ca-certificate-publisher-controller",
                "selinux-warning-controller",
                "service-cidr-controller",
                "service-lb-controller",
                "serviceaccount-controller",
                "serviceaccount-token-controller",
                "statefulset-controller",
                "storage-version-migrator-controller",
                "storageversion-garbage-collector-controller",
                "taint-eviction-controller",
                "token-cleaner-controller",
                "ttl-after-finished-controller",
                "ttl-controller",
                "validatingadmissionpolicy-status-controller",
                "volumeattributesclass-protection-controller",
            ]
        );
        for (alias, name) in [
            ("daemonset", "daemonset-controller"),
            ("statefulset", "statefulset-controller"),
            ("replicationcontroller", "replicationcontroller-controller"),
            ("endpoint", "endpoints-controller"),
            ("endpointslice", "endpointslice-controller"),
            (
                "endpointslicemirroring",
                "endpointslice-mirroring-controller",
            ),
            ("nodeipam", "node-ipam-controller"),
            (
                "pvc-protection",
                "persistentvolumeclaim-protection-controller",
            ),
            ("pv-protection", "persistentvolume-protection-controller"),
            ("ephemeral-volume", "ephemeral-volume-controller"),
            ("service", "service-lb-controller"),
            ("cloud-node-lifecycle", "cloud-node-lifecycle-controller"),
            ("route", "node-route-controller"),
            (
                "storage-version-gc",
                "storageversion-garbage-collector-controller",
            ),
            (
                "root-ca-cert-publisher",
                "root-ca-certificate-publisher-controller",
            ),
            (
                "legacy-service-account-token-cleaner",
                "legacy-serviceaccount-token-cleaner-controller",
            ),
        ] {
            assert_eq!(
                registry.aliases().get(alias).map(String::as_str),
                Some(name),
                "{alias}"
            );
        }
        assert_eq!(
            registry.aliases().get("namespace").map(String::as_str),
            Some("namespace-controller")
        );
        assert_eq!(
            registry.aliases().get("replicaset").map(String::as_str),
            Some("replicaset-controller")
        );
        assert_eq!(
            registry.aliases().get("serviceaccount").map(String::as_str),
            Some("serviceaccount-controller")
        );
        assert_eq!(
            registry.disabled_by_default(),
            [
                "bootstrap-signer-controller",
                "selinux-warning-controller",
                "token-cleaner-controller"
            ]
        );
    }

    #[test]
    fn selection_resolves_against_registered_names() {
        let registry = ControllerRegistry::new()
            .with(noop("replicaset-controller").with_aliases(&["replicaset"]))
            .and_then(|r| r.with(noop("deployment-controller").with_aliases(&["deployment"])))
            .and_then(|r| r.with(noop("bootstrap-signer-controller").disabled_by_default()))
            .expect("registry");
        assert_eq!(
            registry.disabled_by_default(),
            vec!["bootstrap-signer-controller"]
        );
        let names = |entries: &[&str]| -> Vec<String> {
            let selection = registry.select(entries).expect("select");
            registry
                .enabled(&selection)
                .map(|d| d.name().to_owned())
                .collect()
        };
        assert_eq!(
            names(&["*"]),
            vec!["deployment-controller", "replicaset-controller"]
        );
        assert_eq!(names(&["*", "-replicaset"]), vec!["deployment-controller"]);
        assert_eq!(
            names(&["bootstrap-signer-controller"]),
            vec!["bootstrap-signer-controller"]
        );
        assert!(registry.select(&["-garbagecollector"]).is_err());
    }

    /// `--controllers` as kube-controller-manager validates it: names and aliases resolve, an
    /// unknown name is refused with the list of known ones.
    #[test]
    fn controllers_flag_resolves_names_and_aliases_and_refuses_unknown_ones() {
        let registry = ControllerRegistry::new()
            .with(noop("replicaset-controller").with_aliases(&["replicaset"]))
            .and_then(|r| r.with(noop("deployment-controller").with_aliases(&["deployment"])))
            .expect("registry");
        let selection = registry
            .select(&["*", "-replicaset", "-deployment-controller"])
            .expect("known names and aliases");
        assert!(!selection.is_enabled("replicaset-controller", false));
        assert!(!selection.is_enabled("deployment-controller", false));
        let err = registry
            .select(&["*", "-frobnicator"])
            .expect_err("unknown controller");
        let msg = err.to_string();
        assert!(
            msg.contains("\"frobnicator\" is not in the list of known controllers"),
            "{msg}"
        );
        assert!(
            msg.contains("replicaset-controller"),
            "lists known ones: {msg}"
        );
    }
}
