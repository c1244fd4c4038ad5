//! authorization.k8s.io/v1 selfsubjectaccessreviews, selfsubjectrulesreviews, subjectaccessreviews, localsubjectaccessreviews: create-only, never stored, answered by the server's authorizer (upstream's bootstrap policy; see [`crate::auth`]).

use k8s_openapi::api::authorization::v1::{
    LocalSubjectAccessReview, SelfSubjectAccessReview, SelfSubjectRulesReview, SubjectAccessReview,
};

use crate::registry::resource::ResourceDef;
use crate::resources::review::{
    AccessReview, AccessReviewStrategy, SelfSubjectRulesReviewStrategy,
};
use crate::strategic_merge::kinds;
use crate::table::printers;

/// authorization.k8s.io/v1 selfsubjectaccessreviews (`kubectl auth can-i`).
pub static SELF_SUBJECT_ACCESS_REVIEWS: ResourceDef = ResourceDef::of::<SelfSubjectAccessReview>()
    .transient()
    .strategy(&AccessReviewStrategy {
        review: AccessReview::SelfSubject,
    })
    .printer(printers::GENERIC)
    .merge_schema(&kinds::METADATA_ONLY);

/// authorization.k8s.io/v1 selfsubjectrulesreviews (`kubectl auth can-i --list`).
pub static SELF_SUBJECT_RULES_REVIEWS: ResourceDef = ResourceDef::of::<SelfSubjectRulesReview>()
    .transient()
    .strategy(&SelfSubjectRulesReviewStrategy)
    .printer(printers::GENERIC)
    .merge_schema(&kinds::METADATA_ONLY);

/// authorization.k8s.io/v1 subjectaccessreviews.
pub static SUBJECT_ACCESS_REVIEWS: ResourceDef = ResourceDef::of::<SubjectAccessReview>()
    .transient()
    .strategy(&AccessReviewStrategy {
        review: AccessReview::Subject,
    })
    .printer(printers::GENERIC)
    .merge_schema(&kinds::METADATA_ONLY);

/// authorization.k8s.io/v1 localsubjectaccessreviews (namespaced).
pub static LOCAL_SUBJECT_ACCESS_REVIEWS: ResourceDef =
    ResourceDef::of::<LocalSubjectAccessReview>()
        .transient()
        .strategy(&AccessReviewStrategy {
            review: AccessReview::LocalSubject,
        })
        .printer(printers::GENERIC)
        .merge_schema(&kinds::METADATA_ONLY);
