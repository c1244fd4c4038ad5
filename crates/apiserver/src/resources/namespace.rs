//! core/v1 namespaces: the `kubernetes` finalizer, the `Active` phase and the metadata.name label.

use k8s_openapi::api::core::v1::Namespace;
use serde_json::{Value, json};

use crate::object;
use crate::registry::resource::{ResourceDef, Rest, SelectableField, Verbs};
use crate::registry::strategy::Strategy;
use crate::registry::subresource::Subresource;
use crate::strategic_merge::kinds;
use crate::table::printers;
use crate::validation::NameRule;

/// The namespaces resource. Upstream's namespace storage has no collection delete, so
/// discovery lists no `deletecollection`.
pub static NAMESPACES: ResourceDef = ResourceDef::of::<Namespace>()
    .short_names(&["ns"])
    .verbs(Verbs::ALL.without(Verbs::DELETE_COLLECTION))
    .subresources(&[Subresource::Status, Subresource::Finalize])
    .fields(&[SelectableField::string("status.phase", "/status/phase")])
    .strategy(&NamespaceStrategy)
    .rest(Rest::DeleteAfterFinalize)
    .printer(printers::NAMESPACE)
    .merge_schema(&kinds::NAMESPACE);

/// The finalizer the namespace controller removes once a namespace is empty.
pub const FINALIZER_KUBERNETES: &str = "kubernetes";

/// The label every namespace carries with its own name.
pub const LABEL_METADATA_NAME: &str = "kubernetes.io/metadata.name";

/// The namespace strategy (upstream's `namespaceStrategy`).
#[derive(Debug, Default)]
pub struct NamespaceStrategy;

impl Strategy for NamespaceStrategy {
    fn name_rule(&self) -> NameRule {
        NameRule::Label
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["spec"] = json!({"finalizers": [FINALIZER_KUBERNETES]});
        obj["status"] = json!({"phase": "Active"});
        set_name_label(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        // Finalizers change only through /finalize.
        new["spec"] = old.get("spec").cloned().unwrap_or_else(|| json!({}));
        set_name_label(new);
    }
}

fn set_name_label(obj: &mut Value) {
    let name = object::name(obj).to_owned();
    let meta = object::metadata_mut(obj);
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Default::default()));
    if !labels.is_object() {
        *labels = Value::Object(Default::default());
    }
    labels[LABEL_METADATA_NAME] = Value::String(name);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_sets_phase_finalizer_and_label() {
        let mut ns = json!({"metadata": {"name": "team-a"}});
        NamespaceStrategy.prepare_for_create(&mut ns);
        assert_eq!(ns["status"]["phase"], "Active");
        assert_eq!(ns["spec"]["finalizers"][0], "kubernetes");
        assert_eq!(ns["metadata"]["labels"][LABEL_METADATA_NAME], "team-a");
    }
}
