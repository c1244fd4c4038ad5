//! The connect subresources (`pods/log`, `pods/exec`, `pods/attach`, `pods/portforward`, `pods/proxy`, `services/proxy`, `nodes/proxy`): answered with a `400 BadRequest` that says why, since simulated nodes run no containers.
//!
//! Upstream's API server forwards these to the kubelet of the pod's node (or to a pod behind
//! a service). kcm's nodes are simulated: no kubelet, no container, no log. Rather than a
//! `404` that reads as "kubectl or the server is broken", each request names the object and
//! why nothing can answer, so `kubectl logs` and `kubectl exec` print a readable error. The
//! object must exist (a missing one is a `404` as upstream).

use serde_json::Value;

use crate::error::{ApiError, Result};
use crate::registry::Registry;
use crate::registry::resource::ResourceDef;
use crate::registry::subresource::Subresource;

impl Registry {
    /// Answers a connect subresource of `name`: 404 if the object is missing, otherwise a 400
    /// explaining that simulated nodes cannot serve it.
    pub async fn connect(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        sub: Subresource,
    ) -> Result<Value> {
        let obj = self.get(def, namespace, name).await?;
        Err(ApiError::bad_request(refusal(def, &obj, sub)))
    }
}

/// Why `sub` of `obj` cannot be served: the resource's own reason, or the generic one.
fn refusal(def: &ResourceDef, obj: &Value, sub: Subresource) -> String {
    def.strategy.connect_refusal(obj, sub).unwrap_or_else(|| {
        let name = crate::object::name(obj);
        format!("{}/{name} has no {} to connect to", def.plural, sub.name())
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resources::{core, pod, service};

    #[test]
    fn refusals_name_the_object_and_why() {
        let scheduled = json!({"metadata": {"name": "web"}, "spec": {"nodeName": "kcm-node-1"}});
        let pending = json!({"metadata": {"name": "web"}, "spec": {}});
        let cases = [
            (
                &pod::PODS,
                &scheduled,
                Subresource::Exec,
                "pod \"web\" runs on the simulated node \"kcm-node-1\": there is no container to exec into",
            ),
            (
                &pod::PODS,
                &scheduled,
                Subresource::Log,
                "pod \"web\" runs on the simulated node \"kcm-node-1\": there are no container logs to read",
            ),
            (
                &pod::PODS,
                &pending,
                Subresource::Attach,
                "pod \"web\" is not scheduled to a node yet: there is no container to attach to",
            ),
            (
                &core::NODES,
                &json!({"metadata": {"name": "kcm-node-1"}}),
                Subresource::Proxy,
                "node \"kcm-node-1\" is simulated: there is no kubelet to proxy to",
            ),
        ];
        for (def, obj, sub, want) in cases {
            assert_eq!(refusal(def, obj, sub), want, "{}", sub.name());
        }
        assert!(
            refusal(
                &service::SERVICES,
                &json!({"metadata": {"name": "web"}}),
                Subresource::Proxy
            )
            .starts_with("service \"web\" cannot be proxied")
        );
    }
}
