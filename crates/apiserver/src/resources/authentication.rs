//! authentication.k8s.io/v1 selfsubjectreviews and tokenreviews: create-only, never stored, answered from the requester and the server's token authenticator (see [`crate::auth`]).

use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenReview};
use serde_json::Value;

use crate::error::ApiError;
use crate::registry::Registry;
use crate::registry::resource::ResourceDef;
use crate::registry::store_hooks::StoreHooks;
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
    .hooks(&TokenReviewHooks)
    .strategy(&TokenReviewStrategy)
    .printer(printers::GENERIC)
    .merge_schema(&kinds::METADATA_ONLY);

/// The tokenreviews storage (upstream's TokenReview `REST.Create`): the token is reviewed by
/// the server's authenticator, which may call out (a webhook), so the answer is made here
/// rather than in the strategy.
#[derive(Debug, Default)]
pub struct TokenReviewHooks;

#[async_trait::async_trait]
impl StoreHooks for TokenReviewHooks {
    async fn create(
        &self,
        registry: &Registry,
        def: &ResourceDef,
        _namespace: &str,
        obj: &Value,
        _dry_run: bool,
    ) -> Option<Result<Value, ApiError>> {
        Some(registry.create_token_review(def, obj.clone()).await)
    }
}
