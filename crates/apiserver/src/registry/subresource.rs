//! The subresources a resource may serve (`/status`, `/scale`, `/binding`, `/eviction`, `/finalize`, `/approval`, and the connect subresources `/log`, `/exec`, `/attach`, `/portforward`, `/proxy`): their names, kinds and verbs.

use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::core::v1::Binding;
use k8s_openapi::api::policy::v1::Eviction;

use crate::openapi::schemas::TypedKind;

/// A subresource a resource serves. What a subresource does is the registry's (one file per
/// subresource); a resource only lists which ones it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subresource {
    /// `/status`: get, update and patch of `.status` only.
    Status,
    /// `/scale`: autoscaling/v1 `Scale` over `spec.replicas`.
    Scale,
    /// `pods/binding`: assigns a pod to a node.
    Binding,
    /// `pods/eviction`: a PodDisruptionBudget-checked delete.
    Eviction,
    /// `namespaces/finalize`: updates `spec.finalizers`.
    Finalize,
    /// `pods/log`: a container's log (upstream's `LogREST`).
    Log,
    /// `pods/exec`: a command run in a container (a connect subresource).
    Exec,
    /// `pods/attach`: the streams of a running container (a connect subresource).
    Attach,
    /// `pods/portforward`: a tunnel to a pod's port (a connect subresource).
    PortForward,
    /// `pods/proxy`, `services/proxy`, `nodes/proxy`: HTTP proxied to the object, with any
    /// path after `/proxy/` (a connect subresource).
    Proxy,
    /// `certificatesigningrequests/approval`: get, update and patch of the approval
    /// conditions (the strategy's `prepare_for_approval_update` says what may change).
    Approval,
}

impl Subresource {
    /// The path segment, e.g. `status`.
    pub fn name(self) -> &'static str {
        match self {
            Subresource::Status => "status",
            Subresource::Scale => "scale",
            Subresource::Binding => "binding",
            Subresource::Eviction => "eviction",
            Subresource::Finalize => "finalize",
            Subresource::Log => "log",
            Subresource::Exec => "exec",
            Subresource::Attach => "attach",
            Subresource::PortForward => "portforward",
            Subresource::Proxy => "proxy",
            Subresource::Approval => "approval",
        }
    }

    /// Whether it is a connect subresource (a stream or proxy to a running container, node
    /// or service), which simulated nodes cannot serve.
    pub fn is_connect(self) -> bool {
        matches!(
            self,
            Subresource::Log
                | Subresource::Exec
                | Subresource::Attach
                | Subresource::PortForward
                | Subresource::Proxy
        )
    }

    /// The group/version/kind requests and answers carry, given the parent's (discovery's
    /// `responseKind`): the parent's own for `/status`, `/finalize` and `/log`, the options
    /// kinds of upstream's connect subresources (`PodExecOptions`, `NodeProxyOptions`, ...).
    pub fn kind<'a>(self, parent: (&'a str, &'a str, &'a str)) -> (&'a str, &'a str, &'a str) {
        let options = |kind| ("", "v1", kind);
        match self {
            Subresource::Exec => options("PodExecOptions"),
            Subresource::Attach => options("PodAttachOptions"),
            Subresource::PortForward => options("PodPortForwardOptions"),
            Subresource::Proxy => options(match parent.2 {
                "Pod" => "PodProxyOptions",
                "Service" => "ServiceProxyOptions",
                "Node" => "NodeProxyOptions",
                other => other,
            }),
            _ => match self.schema() {
                Some(k) => (k.group, k.version, k.kind),
                None => parent,
            },
        }
    }

    /// The verbs discovery lists for it.
    pub fn verbs(self) -> &'static [&'static str] {
        match self {
            Subresource::Status | Subresource::Scale | Subresource::Approval => {
                &["get", "patch", "update"]
            }
            Subresource::Binding | Subresource::Eviction => &["create"],
            Subresource::Finalize => &["update"],
            Subresource::Log => &["get"],
            Subresource::Exec | Subresource::Attach | Subresource::PortForward => {
                &["create", "get"]
            }
            Subresource::Proxy => &["create", "delete", "get", "patch", "update"],
        }
    }

    /// The typed kind of a subresource with a kind of its own (Scale, Binding, Eviction), for
    /// the OpenAPI documents; `None` when it carries the parent's kind or an options kind
    /// without a schema (the connect subresources).
    pub fn schema(self) -> Option<TypedKind> {
        match self {
            Subresource::Status
            | Subresource::Finalize
            | Subresource::Approval
            | Subresource::Log
            | Subresource::Exec
            | Subresource::Attach
            | Subresource::PortForward
            | Subresource::Proxy => None,
            Subresource::Scale => Some(TypedKind::of::<Scale>()),
            Subresource::Binding => Some(TypedKind::of::<Binding>()),
            Subresource::Eviction => Some(TypedKind::of::<Eviction>()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_the_parents_unless_the_subresource_has_its_own() {
        let parent = ("apps", "v1", "Deployment");
        let cases = [
            (Subresource::Status, ("apps", "v1", "Deployment")),
            (Subresource::Finalize, ("apps", "v1", "Deployment")),
            (Subresource::Approval, ("apps", "v1", "Deployment")),
            (Subresource::Scale, ("autoscaling", "v1", "Scale")),
            (Subresource::Binding, ("", "v1", "Binding")),
            (Subresource::Eviction, ("policy", "v1", "Eviction")),
            (Subresource::Log, ("apps", "v1", "Deployment")),
            (Subresource::Exec, ("", "v1", "PodExecOptions")),
            (
                Subresource::PortForward,
                ("", "v1", "PodPortForwardOptions"),
            ),
        ];
        for (sub, want) in cases {
            assert_eq!(sub.kind(parent), want, "{}", sub.name());
        }
        let proxies = [
            ("Pod", "PodProxyOptions"),
            ("Service", "ServiceProxyOptions"),
            ("Node", "NodeProxyOptions"),
        ];
        for (parent, want) in proxies {
            assert_eq!(
                Subresource::Proxy.kind(("", "v1", parent)),
                ("", "v1", want)
            );
        }
    }
}
