//! What a plugin is told about one request, as upstream's `admission.Attributes`: the operation, the resource, the objects, the user, dry run; and the warnings plugins add.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::OnceCell;

use crate::admission::reinvocation::Reinvocation;
use crate::admission::source::ObjectSource;
use crate::auth::user::UserInfo;
use crate::error::{ApiError, Result};
use crate::registry::resource::ResourceDef;
use crate::resources::namespace::NAMESPACES;

/// The operation being admitted (upstream's `admission.Operation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `CREATE`: a POST to a collection (or a create through PUT, or a create subresource).
    Create,
    /// `UPDATE`: PUT or PATCH of an object or a subresource.
    Update,
    /// `DELETE`: one object (collections are admitted object by object).
    Delete,
    /// `CONNECT`: exec, attach, port-forward, proxy.
    Connect,
}

impl Operation {
    /// The name upstream uses (`CREATE`, ...), as in `AdmissionReview` and audit.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// One request as the admission chain sees it. Mutating plugins change [`Self::object`];
/// validating plugins only read it.
#[derive(Debug)]
pub struct Attributes<'a> {
    /// What the request does.
    pub operation: Operation,
    /// The resource written (kind, group, version, plural).
    pub resource: &'a ResourceDef,
    /// The subresource written (`status`, `binding`, `eviction`, `scale`), or `""`.
    pub subresource: &'a str,
    /// The request's namespace (`""` for cluster-scoped resources).
    pub namespace: &'a str,
    /// The object's name (already generated from `generateName` on create).
    pub name: &'a str,
    /// The new object (create, update); `None` on delete and connect.
    pub object: Option<Value>,
    /// The stored object (update, delete).
    pub old_object: Option<&'a Value>,
    /// Who asked.
    pub user: &'a UserInfo,
    /// `dryRun=All`: plugins must have no side effects.
    pub dry_run: bool,
    /// Warnings for the client (`Warning: 299` headers), in the order added.
    warnings: Vec<String>,
    /// Whether a webhook patched [`Self::object`] (the registry validates the object again).
    patched: bool,
    /// The mutating phase's reinvocation state (a second round after a webhook's change).
    pub reinvocation: Reinvocation,
    /// The request's namespace object, read at most once per request and shared by every
    /// plugin that needs it (NamespaceLifecycle, PodSecurity); `None` when it does not exist.
    namespace_object: OnceCell<Option<Arc<Value>>>,
    /// Lists already read in this request, by storage prefix, so a plugin listing in both
    /// phases (LimitRanger) or two plugins listing the same objects read the store once.
    lists: std::sync::Mutex<Vec<(String, Arc<Vec<Arc<Value>>>)>>,
}

impl<'a> Attributes<'a> {
    /// The attributes of a write of `object` to `resource` (no subresource, no old object).
    pub fn new(
        operation: Operation,
        resource: &'a ResourceDef,
        namespace: &'a str,
        name: &'a str,
        object: Option<Value>,
        user: &'a UserInfo,
    ) -> Self {
        Self {
            operation,
            resource,
            subresource: "",
            namespace,
            name,
            object,
            old_object: None,
            user,
            dry_run: false,
            warnings: Vec::new(),
            patched: false,
            reinvocation: Reinvocation::default(),
            namespace_object: OnceCell::new(),
            lists: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Sets the subresource.
    pub fn with_subresource(mut self, subresource: &'a str) -> Self {
        self.subresource = subresource;
        self
    }

    /// Sets the stored object.
    pub fn with_old_object(mut self, old: Option<&'a Value>) -> Self {
        self.old_object = old;
        self
    }

    /// Sets dry run.
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Whether the request writes `def`'s resource itself (same group and plural, any
    /// version, no subresource), as plugins' `a.GetResource().GroupResource() == ...` checks.
    pub fn is_main(&self, def: &ResourceDef) -> bool {
        self.subresource.is_empty() && self.is_resource(def)
    }

    /// Whether the request targets `def`'s resource (any version, any subresource).
    pub fn is_resource(&self, def: &ResourceDef) -> bool {
        self.resource.group == def.group && self.resource.plural == def.plural
    }

    /// Adds a warning for the client.
    pub fn add_warning(&mut self, warning: impl Into<String>) {
        self.warnings.push(warning.into());
    }

    /// The warnings added so far.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Takes the warnings added so far.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// Records that a webhook patched the object.
    pub fn mark_patched(&mut self) {
        self.patched = true;
    }

    /// Whether a webhook patched the object (it must be validated again, as upstream
    /// validates after the whole mutating phase).
    pub fn patched(&self) -> bool {
        self.patched
    }

    /// A 403 naming the object, as upstream's `admission.NewForbidden`.
    pub fn forbidden(&self, why: &str) -> ApiError {
        ApiError::forbidden(self.resource.group_resource(), self.name, why)
    }

    /// Every object of `def` in `namespace`, read at most once per request (a racing write
    /// between the phases is seen by neither, as with upstream's informer-fed listers).
    pub async fn list_once(
        &self,
        source: &dyn ObjectSource,
        def: &ResourceDef,
        namespace: &str,
    ) -> Result<Arc<Vec<Arc<Value>>>> {
        let key = def.storage_prefix((!namespace.is_empty()).then_some(namespace));
        let cached = self
            .lists
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| Arc::clone(v));
        if let Some(list) = cached {
            return Ok(list);
        }
        // Read without the lock held (it is never held across an await).
        let list = Arc::new(source.list(def, namespace).await?);
        self.lists
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((key, Arc::clone(&list)));
        Ok(list)
    }

    /// The request's namespace object (read once per request), `None` when it is missing or
    /// the request is cluster-scoped.
    pub async fn namespace_object(&self, source: &dyn ObjectSource) -> Result<Option<Arc<Value>>> {
        if self.namespace.is_empty() {
            return Ok(None);
        }
        self.namespace_object
            .get_or_try_init(|| async { source.get(&NAMESPACES, "", self.namespace).await })
            .await
            .cloned()
    }

    /// The `request` of a review without its objects (what a match condition sees as `request`):
    /// uid, kind, resource, subresource, their request* forms, name, namespace, operation,
    /// userInfo, dryRun and options.
    pub fn admission_request(&self, uid: &str) -> Value {
        let a = self;
        let def = a.resource;
        let kind = json!({"group": def.group, "version": def.version, "kind": def.kind});
        let resource = json!({"group": def.group, "version": def.version, "resource": def.plural});
        let mut user = Map::new();
        user.insert("username".to_owned(), json!(a.user.username));
        if !a.user.uid.is_empty() {
            user.insert("uid".to_owned(), json!(a.user.uid));
        }
        if !a.user.groups.is_empty() {
            user.insert("groups".to_owned(), json!(a.user.groups));
        }
        if !a.user.extra.is_empty() {
            user.insert("extra".to_owned(), json!(a.user.extra));
        }
        let mut request = json!({
            "uid": uid,
            "kind": kind,
            "resource": resource,
            "requestKind": kind,
            "requestResource": resource,
            "name": a.name,
            "namespace": a.namespace,
            "operation": a.operation.as_str(),
            "userInfo": user,
            "dryRun": a.dry_run,
        });
        if !a.subresource.is_empty() {
            request["subResource"] = json!(a.subresource);
            request["requestSubResource"] = json!(a.subresource);
        }
        if let Some(options) = options(a) {
            request["options"] = options;
        }
        request
    }
}

/// The operation's options object (`CreateOptions`, `UpdateOptions`, `DeleteOptions`), as far
/// as the attributes know them (their dry run).
fn options(a: &Attributes<'_>) -> Option<Value> {
    let kind = match a.operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
        Operation::Connect => return None,
    };
    let mut options = json!({"apiVersion": "meta.k8s.io/v1", "kind": kind});
    if a.dry_run {
        options["dryRun"] = json!(["All"]);
    }
    Some(options)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resources::pod::PODS;

    #[test]
    fn operation_names_are_upstreams() {
        let names: Vec<_> = [
            Operation::Create,
            Operation::Update,
            Operation::Delete,
            Operation::Connect,
        ]
        .into_iter()
        .map(Operation::as_str)
        .collect();
        assert_eq!(names, ["CREATE", "UPDATE", "DELETE", "CONNECT"]);
    }

    #[test]
    fn subresources_are_not_the_main_resource() {
        let user = UserInfo::admin();
        let a = Attributes::new(Operation::Update, &PODS, "ns", "p", Some(json!({})), &user);
        assert!(a.is_main(&PODS));
        let status = a.with_subresource("status");
        assert!(!status.is_main(&PODS));
        assert!(status.is_resource(&PODS));
        assert_eq!(
            status.forbidden("no").message,
            "pods \"p\" is forbidden: no"
        );
    }
}
