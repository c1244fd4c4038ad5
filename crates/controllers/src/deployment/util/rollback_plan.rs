//! Rolling back through the deprecated `deprecated.deployment.rollback.to` annotation, as
//! upstream `rollback.go`. (`kubectl rollout undo` patches the template client-side and needs
//! nothing from the controller beyond the normal rollout.)

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::accessors::{annotation, deployment_template, name, rs_template};
use super::annotations::{
    DEPRECATED_ROLLBACK_TO_ANNOTATION, last_revision, revision, set_deployment_annotations_to,
};
use super::conditions::{ROLLBACK_DONE, ROLLBACK_REVISION_NOT_FOUND, ROLLBACK_TEMPLATE_UNCHANGED};
use super::template::{
    DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, clone_and_remove_label, equal_ignore_hash,
};

/// The revision the Deployment asks to roll back to (0: the previous one); `None` when no
/// (valid) rollback is requested, as upstream `getRollbackTo`.
pub fn rollback_to(d: &Deployment) -> Option<i64> {
    annotation(&d.metadata, DEPRECATED_ROLLBACK_TO_ANNOTATION)
        .filter(|v| !v.is_empty())
        .and_then(|v| v.parse().ok())
}

/// Copies a ReplicaSet's template onto the Deployment without the hash label, as upstream
/// `SetFromReplicaSetTemplate`.
pub fn set_from_replica_set_template(d: &mut Deployment, template: &PodTemplateSpec) {
    let Some(spec) = d.spec.as_mut() else {
        return;
    };
    let mut template = template.clone();
    if let Some(meta) = template.metadata.as_mut() {
        meta.labels =
            clone_and_remove_label(meta.labels.as_ref(), DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY);
    }
    spec.template = template;
}

/// The outcome of a rollback request, with the event to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollbackOutcome {
    /// Whether the Deployment's template (and annotations) were replaced.
    pub rolled_back: bool,
    /// Whether the event is a warning.
    pub warning: bool,
    /// The event reason.
    pub reason: &'static str,
    /// The event message.
    pub message: String,
}

/// Handles a rollback request on `d` in place, as upstream `rollback`: finds the ReplicaSet of
/// the requested revision (0: the previous one) among `all_rss`, copies its template and
/// annotations onto the Deployment unless they are already the same, and always clears the
/// request. The controller then updates the Deployment and records the event. `None` when no
/// rollback is requested.
pub fn rollback(d: &mut Deployment, all_rss: &[&ReplicaSet]) -> Option<RollbackOutcome> {
    let mut to = rollback_to(d)?;
    if let Some(a) = d.metadata.annotations.as_mut() {
        a.remove(DEPRECATED_ROLLBACK_TO_ANNOTATION);
    }
    let not_found = |message: &str| RollbackOutcome {
        rolled_back: false,
        warning: true,
        reason: ROLLBACK_REVISION_NOT_FOUND,
        message: message.to_owned(),
    };
    if to == 0 {
        to = last_revision(all_rss);
        if to == 0 {
            return Some(not_found("Unable to find last revision."));
        }
    }
    let Some(target) = all_rss
        .iter()
        .copied()
        .find(|rs| revision(&rs.metadata).is_ok_and(|v| v == to))
    else {
        return Some(not_found("Unable to find the revision to rollback to."));
    };
    let zero = PodTemplateSpec::default();
    let target_template = rs_template(target).unwrap_or(&zero);
    if equal_ignore_hash(deployment_template(d).unwrap_or(&zero), target_template) {
        return Some(RollbackOutcome {
            rolled_back: false,
            warning: true,
            reason: ROLLBACK_TEMPLATE_UNCHANGED,
            message: format!(
                "The rollback revision contains the same template as current deployment {:?}",
                name(&d.metadata)
            ),
        });
    }
    let target_template = target_template.clone();
    set_from_replica_set_template(d, &target_template);
    set_deployment_annotations_to(d, target);
    Some(RollbackOutcome {
        rolled_back: true,
        warning: false,
        reason: ROLLBACK_DONE,
        message: format!(
            "Rolled back deployment {:?} to revision {to}",
            name(&d.metadata)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::super::annotations::{CHANGE_CAUSE_ANNOTATION, REVISION_ANNOTATION};
    use super::super::test_support::{deployment, rs, with_annotations};
    use super::*;

    fn with_image(mut r: ReplicaSet, image: &str) -> ReplicaSet {
        if let Some(c) = r
            .spec
            .as_mut()
            .and_then(|s| s.template.as_mut())
            .and_then(|t| t.spec.as_mut())
            .and_then(|s| s.containers.first_mut())
        {
            c.image = Some(image.into());
        }
        if let Some(labels) = r
            .spec
            .as_mut()
            .and_then(|s| s.template.as_mut())
            .and_then(|t| t.metadata.as_mut())
            .and_then(|m| m.labels.as_mut())
        {
            labels.insert(
                DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY.into(),
                format!("h-{image}"),
            );
        }
        r
    }

    fn image(d: &Deployment) -> Option<String> {
        deployment_template(d)
            .and_then(|t| t.spec.as_ref())
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone())
    }

    #[test]
    fn rollback_table() {
        struct Case {
            name: &'static str,
            request: Option<&'static str>,
            expected: Option<(&'static str, bool)>,
            expected_image: &'static str,
        }
        let cases = [
            Case {
                name: "no request",
                request: None,
                expected: None,
                expected_image: "foo/bar",
            },
            Case {
                name: "invalid request is ignored",
                request: Some("x"),
                expected: None,
                expected_image: "foo/bar",
            },
            Case {
                name: "to the previous revision",
                request: Some("0"),
                expected: Some((ROLLBACK_DONE, true)),
                expected_image: "v2",
            },
            Case {
                name: "to a given revision",
                request: Some("1"),
                expected: Some((ROLLBACK_DONE, true)),
                expected_image: "v1",
            },
            Case {
                name: "unknown revision",
                request: Some("9"),
                expected: Some((ROLLBACK_REVISION_NOT_FOUND, false)),
                expected_image: "foo/bar",
            },
            Case {
                name: "current template",
                request: Some("3"),
                expected: Some((ROLLBACK_TEMPLATE_UNCHANGED, false)),
                expected_image: "foo/bar",
            },
        ];
        let v1 = with_annotations(
            with_image(rs("web-1", 0), "v1"),
            &[
                (REVISION_ANNOTATION, "1"),
                (CHANGE_CAUSE_ANNOTATION, "first"),
            ],
        );
        let v2 = with_annotations(
            with_image(rs("web-2", 0), "v2"),
            &[(REVISION_ANNOTATION, "2")],
        );
        let v3 = with_annotations(rs("web-3", 1), &[(REVISION_ANNOTATION, "3")]);
        for c in cases {
            let mut d = deployment("web", 1);
            if let Some(r) = c.request {
                d = with_annotations(d, &[(DEPRECATED_ROLLBACK_TO_ANNOTATION, r)]);
            }
            let got = rollback(&mut d, &[&v1, &v2, &v3]);
            assert_eq!(
                got.as_ref().map(|o| (o.reason, o.rolled_back)),
                c.expected,
                "{}",
                c.name
            );
            assert_eq!(image(&d).as_deref(), Some(c.expected_image), "{}", c.name);
            if c.expected.is_some() {
                assert_eq!(
                    annotation(&d.metadata, DEPRECATED_ROLLBACK_TO_ANNOTATION),
                    None,
                    "{}: request cleared",
                    c.name
                );
            }
            // The hash label never leaks into the Deployment's template.
            let labels = deployment_template(&d)
                .and_then(|t| t.metadata.as_ref())
                .and_then(|m| m.labels.clone())
                .unwrap_or_default();
            assert!(
                !labels.contains_key(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY),
                "{}",
                c.name
            );
        }
        // Annotations follow the template of the target revision.
        let mut d = with_annotations(
            deployment("web", 1),
            &[(DEPRECATED_ROLLBACK_TO_ANNOTATION, "1")],
        );
        let got = rollback(&mut d, &[&v1, &v2, &v3]).expect("requested");
        assert_eq!(got.message, "Rolled back deployment \"web\" to revision 1");
        assert_eq!(
            annotation(&d.metadata, CHANGE_CAUSE_ANNOTATION),
            Some("first")
        );
    }

    #[test]
    fn no_previous_revision() {
        let only = with_annotations(rs("web-1", 1), &[(REVISION_ANNOTATION, "1")]);
        let mut d = with_annotations(
            deployment("web", 1),
            &[(DEPRECATED_ROLLBACK_TO_ANNOTATION, "0")],
        );
        let got = rollback(&mut d, &[&only]).expect("requested");
        assert_eq!(got.reason, ROLLBACK_REVISION_NOT_FOUND);
        assert_eq!(got.message, "Unable to find last revision.");
    }
}
