//! Create (`POST` to a collection): system metadata, `generateName`, defaults, admission, validation, dry run.

use kcm_machinery::quota::Operation as QuotaOperation;
use rand::Rng;
use serde_json::Value;

use crate::admission::resource_quota::QuotaAttributes;
use crate::admission::{Attributes, Operation};
use crate::auth::user::UserInfo;
use crate::error::{ApiError, Result};
use crate::object;
use crate::registry::options::{Decoded, WriteOptions, WriteOutcome};
use crate::registry::resource::ResourceDef;
use crate::registry::strategy::RequestContext;
use crate::registry::{Registry, encode_for_storage};
use crate::storage;
use crate::validation::validate_object_meta;

/// Characters `generateName` suffixes are drawn from (no vowels, no confusable digits), as
/// upstream's `utilrand.String`.
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// Length of a generated suffix.
const NAME_SUFFIX_LEN: usize = 5;
/// Longest prefix kept from `generateName` (63 - 5), as upstream's `maxGeneratedNameLength`.
const MAX_GENERATED_PREFIX: usize = 58;
/// How many names are tried on collision (upstream retries a generated name 7 more times).
const GENERATE_NAME_ATTEMPTS: usize = 8;

impl Registry {
    /// Creates an object in `namespace` (ignored for cluster-scoped resources) and returns it
    /// as stored, with `resourceVersion`; a [transient](ResourceDef::transient) resource's
    /// object is answered, never stored.
    pub async fn create(
        &self,
        def: &ResourceDef,
        namespace: &str,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<WriteOutcome> {
        let mut obj = def.check_kind(body)?;
        bind_namespace(def, &mut obj, namespace)?;
        let warnings = self.check_fields(
            def,
            &obj,
            opts.field_validation,
            Decoded::Body(&opts.decoding),
        )?;
        if let Some(hooks) = crate::registry::rest::of(def)
            && let Some(answer) = hooks.create(self, def, namespace, &obj, opts.dry_run).await
        {
            return answer.map(|object| WriteOutcome {
                object,
                created: true,
                warnings,
            });
        }
        if !def.is_stored() {
            return self
                .create_transient(def, namespace, obj, opts)
                .map(|object| WriteOutcome {
                    object,
                    created: true,
                    warnings,
                });
        }
        let (object, admission_warnings) = self.create_checked(def, obj, opts).await?;
        let mut warnings = warnings;
        warnings.extend(admission_warnings);
        Ok(WriteOutcome {
            object,
            created: true,
            warnings,
        })
    }

    /// Creates an object whose kind, namespace and fields were checked; returns it as stored
    /// with the admission chain's warnings.
    pub(crate) async fn create_checked(
        &self,
        def: &ResourceDef,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<(Value, Vec<String>)> {
        let dry_run = opts.dry_run;
        let mut obj = def.decode(obj).map_err(ApiError::bad_request)?;
        // FillObjectMetaSystemFields and BeforeCreate: the server owns these fields.
        object::set_meta(&mut obj, "uid", uuid::Uuid::new_v4().to_string());
        object::set_meta(&mut obj, "creationTimestamp", object::now_rfc3339());
        // The strategy's PrepareForCreate: 1 where the resource has a generation; elsewhere a
        // client's value is kept, as upstream (BeforeCreate does not touch it).
        if def.generation.set_on_create() {
            object::set_meta(&mut obj, "generation", 1);
        }
        for field in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            object::remove_meta(&mut obj, field);
        }
        let generate_name = object::str_at(&obj, &["metadata", "generateName"])
            .unwrap_or("")
            .to_owned();
        let generated = object::name(&obj).is_empty() && !generate_name.is_empty();
        if generated {
            object::set_meta(&mut obj, "name", generate(&generate_name));
        }
        let server = UserInfo::apiserver();
        let namespace = object::namespace(&obj).to_owned();
        let request = self.request_context(opts, &server, &namespace);
        def.strategy.prepare_for_create_in(&mut obj, &request)?;
        // Mutating admission, the strategy's validation, then validating admission, as
        // upstream's create handler and `Store.Create`.
        let name = object::name(&obj).to_owned();
        let mut attrs = Attributes::new(
            Operation::Create,
            def,
            &namespace,
            &name,
            Some(obj),
            request.user,
        )
        .with_dry_run(dry_run);
        self.admission_admit(&mut attrs).await?;
        let obj = take_admitted(&mut attrs)?;
        let mut errs = validate_object_meta(&obj, def.namespaced, def.strategy.name_rule());
        errs.extend(def.strategy.validate(&obj));
        def.check(object::name(&obj), errs)?;
        attrs.object = Some(obj);
        self.admission_validate(&mut attrs).await?;
        let mut obj = take_admitted(&mut attrs)?;
        let warnings = attrs.take_warnings();
        drop(attrs);
        self.confirm_no_escalation(def, &obj, opts).await?;
        self.admit_quota(QuotaAttributes {
            namespace: &namespace,
            name: object::name(&obj),
            def,
            subresource: "",
            operation: QuotaOperation::Create,
            object: &obj,
            old_object: None,
            dry_run,
        })
        .await?;
        // What the resource began (a Service's allocation lock) waits for the store; if the
        // object is not stored (dry run, the store refused), it is given back.
        let hooks = crate::registry::rest::of(def);
        let mut pending = match hooks {
            Some(hooks) => hooks.begin_create(self, &mut obj).await?,
            None => None,
        };

        if dry_run {
            if let Some(pending) = pending {
                pending.abort(self).await;
            }
            return Ok((obj, warnings));
        }
        let mut attempts = 0;
        loop {
            attempts += 1;
            let name = object::name(&obj).to_owned();
            let key = def.storage_key(object::namespace(&obj), &name);
            let bytes = encode_for_storage(def, &obj)?;
            match self.storage().create(&key, bytes).await {
                Ok(rev) => {
                    object::set_resource_version(&mut obj, rev);
                    if let Some(pending) = pending.take() {
                        pending.commit(self).await;
                    }
                    if let Some(hooks) = hooks {
                        hooks.after_create(self, &obj).await;
                    }
                    return Ok((obj, warnings));
                }
                Err(storage::Error::AlreadyExists { .. })
                    if generated && attempts < GENERATE_NAME_ATTEMPTS =>
                {
                    object::set_meta(&mut obj, "name", generate(&generate_name));
                }
                Err(e) => {
                    // A backend failure (a timeout, say) may still have stored the object:
                    // what it began then stays until the resource's repair knows.
                    if let Some(pending) = pending
                        && !matches!(e, storage::Error::Backend(_))
                    {
                        pending.abort(self).await;
                    }
                    return Err(ApiError::from_storage(e, def.group_resource(), &name));
                }
            }
        }
    }
}

impl Registry {
    /// The create of a never-stored resource (a review API), as upstream's review
    /// `REST.Create`s: the decoded request is validated by the strategy, completed by its
    /// `prepare_for_create_in` (which fills `status` from the request's user and the
    /// server's authenticator or authorizer) and answered. Object metadata rules and
    /// admission do not apply (reviews have no name, and NamespaceLifecycle skips them).
    fn create_transient(
        &self,
        def: &ResourceDef,
        namespace: &str,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value> {
        let mut obj = def.decode(obj).map_err(ApiError::bad_request)?;
        def.check(object::name(&obj), def.strategy.validate(&obj))?;
        let server = UserInfo::apiserver();
        let request = self.request_context(opts, &server, namespace);
        def.strategy.prepare_for_create_in(&mut obj, &request)?;
        Ok(obj)
    }

    /// The request context of a write: its user (`fallback`, the server's identity, for
    /// internal writes), its namespace, and the registry's authenticator and authorizer.
    fn request_context<'a>(
        &'a self,
        opts: &'a WriteOptions,
        fallback: &'a UserInfo,
        namespace: &'a str,
    ) -> RequestContext<'a> {
        RequestContext {
            user: opts.user.as_deref().unwrap_or(fallback),
            namespace,
            authenticator: self.authenticator(),
            authorizer: self.authorizer(),
        }
    }
}

/// The object out of admission attributes (the chain never removes it).
pub(crate) fn take_admitted(attrs: &mut Attributes<'_>) -> Result<Value> {
    attrs
        .object
        .take()
        .ok_or_else(|| ApiError::internal("admission removed the object being written"))
}

/// Fills or checks the object's namespace against the request's, as upstream's
/// `rest.BeforeCreate` / `ValidNamespace`.
pub(crate) fn bind_namespace(def: &ResourceDef, obj: &mut Value, namespace: &str) -> Result<()> {
    if def.namespaced {
        let own = object::namespace(obj);
        if own.is_empty() {
            object::set_meta(obj, "namespace", namespace);
        } else if own != namespace {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    } else {
        object::remove_meta(obj, "namespace");
    }
    Ok(())
}

/// `prefix` (cut to 58 characters) plus 5 random characters, as upstream's `SimpleNameGenerator`.
pub fn generate(prefix: &str) -> String {
    let mut end = prefix.len().min(MAX_GENERATED_PREFIX);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    let mut rng = rand::rng();
    let mut name = String::with_capacity(end + NAME_SUFFIX_LEN);
    name.push_str(&prefix[..end]);
    for _ in 0..NAME_SUFFIX_LEN {
        name.push(NAME_ALPHABET[rng.random_range(0..NAME_ALPHABET.len())] as char);
    }
    name
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resources::pod;

    #[test]
    fn generated_names_use_the_upstream_alphabet() {
        let name = generate("web-");
        assert_eq!(name.len(), 9);
        assert!(name.starts_with("web-"));
        assert!(name[4..].bytes().all(|b| NAME_ALPHABET.contains(&b)));
        let long = generate(&"x".repeat(80));
        assert_eq!(long.len(), 63);
    }

    #[test]
    fn kind_and_namespace_checks() {
        assert!(
            pod::PODS
                .check_kind(json!({"kind": "Pod", "apiVersion": "v1"}))
                .is_ok()
        );
        assert!(pod::PODS.check_kind(json!({})).is_ok());
        assert_eq!(
            pod::PODS
                .check_kind(json!({"kind": "Service"}))
                .map_err(|e| e.code)
                .err(),
            Some(400)
        );
        assert_eq!(
            pod::PODS
                .check_kind(json!({"apiVersion": "apps/v1"}))
                .map_err(|e| e.code)
                .err(),
            Some(400)
        );
        assert_eq!(
            pod::PODS.check_kind(json!([1])).map_err(|e| e.code).err(),
            Some(400)
        );

        let mut obj = json!({"metadata": {}});
        bind_namespace(&pod::PODS, &mut obj, "ns").expect("fills");
        assert_eq!(object::namespace(&obj), "ns");
        let mut other = json!({"metadata": {"namespace": "b"}});
        assert!(bind_namespace(&pod::PODS, &mut other, "ns").is_err());
    }

    #[tokio::test]
    async fn a_transient_create_answers_the_completed_object_and_stores_nothing() {
        use std::sync::Arc;

        use crate::registry::resource::fixtures;
        use crate::storage::memory::MemoryStorage;

        let registry = Registry::with_resources(Arc::new(MemoryStorage::new()), fixtures::ALL);
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}},
        });
        let outcome = registry
            .create(
                &fixtures::ACCESS_REVIEWS,
                "",
                review,
                &WriteOptions::default(),
            )
            .await
            .expect("created");
        assert!(outcome.created);
        assert_eq!(outcome.object["status"]["allowed"], true);
        assert_eq!(
            outcome.object["spec"]["resourceAttributes"]["resource"],
            "pods"
        );
        assert!(outcome.object.pointer("/metadata/uid").is_none());
        assert_eq!(
            registry.storage().current_revision().await.expect("rev"),
            0,
            "nothing was written"
        );

        let invalid = json!({"kind": "SelfSubjectAccessReview", "spec": {}});
        let err = registry
            .create(
                &fixtures::ACCESS_REVIEWS,
                "",
                invalid,
                &WriteOptions::default(),
            )
            .await
            .expect_err("invalid");
        assert_eq!(err.code, 422);
    }

    #[tokio::test]
    async fn versions_sharing_a_storage_read_each_others_writes_converted() {
        use std::sync::Arc;

        use bytes::Bytes;

        use crate::registry::resource::fixtures::{HPAS, HPAS_V1, HPAS_V2};
        use crate::storage::memory::MemoryStorage;

        let registry = Registry::with_resources(Arc::new(MemoryStorage::new()), HPAS);
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}});
        registry
            .storage()
            .create(
                "/registry/core/namespaces/ns",
                Bytes::from(serde_json::to_vec(&ns).expect("json")),
            )
            .await
            .expect("namespace");
        let v1 = json!({
            "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "maxReplicas": 5, "targetCPUUtilizationPercentage": 60},
        });
        registry
            .create(&HPAS_V1, "ns", v1, &WriteOptions::default())
            .await
            .expect("created through v1");
        let as_v2 = registry.get(&HPAS_V2, "ns", "web").await.expect("v2");
        assert_eq!(as_v2["apiVersion"], "autoscaling/v2");
        assert_eq!(
            as_v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            60
        );
        assert!(
            as_v2["spec"]
                .get("targetCPUUtilizationPercentage")
                .is_none()
        );
        let as_v1 = registry.get(&HPAS_V1, "ns", "web").await.expect("v1");
        assert_eq!(as_v1["apiVersion"], "autoscaling/v1");
        assert_eq!(as_v1["spec"]["targetCPUUtilizationPercentage"], 60);
        assert_eq!(
            as_v1["metadata"]["resourceVersion"],
            as_v2["metadata"]["resourceVersion"]
        );
    }
}
