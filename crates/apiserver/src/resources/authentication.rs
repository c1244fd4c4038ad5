//! authentication.k8s.io/v1 selfsubjectreviews and tokenreviews: create-only, never stored, answered from the requester and the server's token authenticator (see [`crate::auth`]).

use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenReview};

use crate::registry::resource::{ResourceDef, Rest};
use crate::resources::review::{SelfSubjectReviewStrategy, TokenReviewStrategy};
use crate::strategic_merge::kinds;
use crate::table::printers;

/// authentication.k8s.io/v1 selfsubjectreviews (`kubectl auth whoami`).
pub static SELF_SUBJECT_REVIEWS: ResourceDef = ResourceDef::of::<SelfSubjectReview>()
    .transient()
    .strategy(&SelfSubjectReviewStrategy)
    .printer(printers::GENERIC)
    .merge_schema(&kinds::METADATA_ONLY);

/// authentication.k8s.io/v1 tokenreviews.
pub static TOKEN_REVIEWS: ResourceDef = ResourceDef::of::<TokenReview>()
    .transient()
    .rest(Rest::ReviewToken)
    .strategy(&TokenReviewStrategy)
    .printer(printers::GENERIC)
    .merge_schema(&kinds::METADATA_ONLY);
