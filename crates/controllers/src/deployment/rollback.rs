//! Rolling back through the deprecated `deprecated.deployment.rollback.to` annotation (upstream `rollback.go`).
//!
//! `kubectl rollout undo` does not go through here: it patches the Deployment's template
//! client-side, and the controller rolls that out like any other template change.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kcm_machinery::events::EventType;

use super::Result;
use super::controller::DeploymentController;
use super::sync::{all_of, refs};
use super::util::conditions::ROLLBACK_DONE;
use super::util::rollback_plan::rollback;

impl DeploymentController {
    /// Handles a rollback request, as upstream's `rollback`: finds the ReplicaSet of the
    /// requested revision (0: the previous one), copies its template and annotations onto the
    /// Deployment unless they are already the same, clears the request and updates the
    /// Deployment. A missing revision or an unchanged template is a warning event; a done
    /// rollback a `DeploymentRollback` event. The revision numbers move on the next sync,
    /// when the restored template's ReplicaSet becomes the new one again.
    pub(super) async fn rollback(
        &self,
        d: &mut Deployment,
        key: &str,
        rs_list: &mut Vec<Arc<ReplicaSet>>,
    ) -> Result<()> {
        let (new_rs, old_rss) = self
            .get_all_replica_sets_and_sync_revision(d, key, rs_list, true)
            .await?;
        let all = all_of(new_rs.as_ref(), &old_rss);
        let Some(outcome) = rollback(d, &refs(&all)) else {
            return Ok(());
        };
        if outcome.warning {
            self.event(
                d,
                EventType::Warning,
                outcome.reason,
                outcome.message.clone(),
            );
        }
        self.update_deployment(key, d).await?;
        if outcome.rolled_back {
            self.event(d, EventType::Normal, ROLLBACK_DONE, outcome.message);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::client::{DeploymentAction, Verb};
    use super::super::test_support::{deployment, fixture, old_rs_for, rs_for};
    use super::super::util::accessors::{annotation, name};
    use super::super::util::annotations::{
        DEPRECATED_ROLLBACK_TO_ANNOTATION, REVISION_ANNOTATION, REVISION_HISTORY_ANNOTATION,
    };
    use super::*;

    fn image(d: &Deployment) -> Option<String> {
        d.spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone())
    }

    fn asking_rollback_to(revision: &str) -> Deployment {
        let mut d = deployment("web", 2, 1, 0);
        d.metadata.annotations = Some(BTreeMap::from([
            (REVISION_ANNOTATION.to_owned(), "2".to_owned()),
            (
                DEPRECATED_ROLLBACK_TO_ANNOTATION.to_owned(),
                revision.to_owned(),
            ),
        ]));
        d
    }

    fn updates(f: &super::super::test_support::Fixture) -> Vec<Deployment> {
        f.client
            .actions_of(Verb::UpdateDeployment)
            .into_iter()
            .filter_map(|a| match a {
                DeploymentAction::UpdateDeployment(d) => Some(d),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn rollback_restores_the_template_and_renumbers_the_revision() {
        let f = fixture();
        let d = asking_rollback_to("1");
        let v1 = old_rs_for(&d, "image:v1", 0, 0, "1", 0);
        let v2 = rs_for(&d, 2, 2, "2", 10);
        f.add_deployment(&d);
        f.add_rs(&v1);
        f.add_rs(&v2);

        f.sync(&d).await.expect("rollback");
        let updated = updates(&f);
        assert_eq!(updated.len(), 1);
        assert_eq!(image(&updated[0]).as_deref(), Some("image:v1"));
        assert_eq!(
            annotation(&updated[0].metadata, DEPRECATED_ROLLBACK_TO_ANNOTATION),
            None
        );
        assert!(
            f.rs_updates().is_empty(),
            "nothing scaled in the rollback pass"
        );
        let events = f.recorder.events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].reason, "DeploymentRollback");
        assert_eq!(
            events[0].message,
            "Rolled back deployment \"web\" to revision 1"
        );

        // The next pass rolls out the restored template: its ReplicaSet is the new one again,
        // with the next revision and its old one in the history.
        f.settle(false);
        let restored = f.stored(&d);
        f.sync(&restored).await.expect("rollout");
        let v1_now = f
            .client
            .replica_set("default", name(&v1.metadata))
            .expect("v1");
        assert_eq!(f.revision_of(name(&v1.metadata)).as_deref(), Some("3"));
        assert_eq!(
            annotation(&v1_now.metadata, REVISION_HISTORY_ANNOTATION),
            Some("1")
        );
    }

    #[tokio::test]
    async fn unknown_revision_is_a_warning_and_clears_the_request() {
        let f = fixture();
        let d = asking_rollback_to("7");
        f.add_deployment(&d);
        f.add_rs(&old_rs_for(&d, "image:v1", 0, 0, "1", 0));
        f.add_rs(&rs_for(&d, 2, 2, "2", 10));
        f.sync(&d).await.expect("sync");
        let updated = updates(&f);
        assert_eq!(updated.len(), 1);
        assert_eq!(
            image(&updated[0]).as_deref(),
            Some("image:v2"),
            "template kept"
        );
        assert_eq!(
            annotation(&updated[0].metadata, DEPRECATED_ROLLBACK_TO_ANNOTATION),
            None
        );
        let events = f.recorder.events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].type_, kcm_machinery::events::EventType::Warning);
        assert_eq!(events[0].reason, "DeploymentRollbackRevisionNotFound");
        assert_eq!(
            events[0].message,
            "Unable to find the revision to rollback to."
        );
    }

    #[tokio::test]
    async fn rollback_to_the_current_template_is_a_warning() {
        let f = fixture();
        let d = asking_rollback_to("2");
        f.add_deployment(&d);
        f.add_rs(&old_rs_for(&d, "image:v1", 0, 0, "1", 0));
        f.add_rs(&rs_for(&d, 2, 2, "2", 10));
        f.sync(&d).await.expect("sync");
        assert_eq!(
            f.recorder.reasons(),
            vec!["DeploymentRollbackTemplateUnchanged"]
        );
        assert_eq!(updates(&f).len(), 1, "the request is cleared");
    }
}
