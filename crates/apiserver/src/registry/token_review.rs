//! `tokenreviews`: whom a token authenticates, answered by the server's authenticator (upstream's `tokenreview.REST.Create`), asynchronously since a ServiceAccount token's objects are read.

use serde_json::Value;

use crate::error::{ApiError, Result};
use crate::object;
use crate::registry::Registry;
use crate::registry::resource::ResourceDef;
use crate::registry::store_hooks::StoreHooks;
use crate::resources::review::{token_review_audiences, token_review_status, token_review_token};

impl Registry {
    /// Answers a TokenReview: never stored, `status` filled from the authenticator.
    pub(crate) async fn create_token_review(&self, def: &ResourceDef, obj: Value) -> Result<Value> {
        let mut obj = def.decode(obj).map_err(ApiError::bad_request)?;
        def.check(object::name(&obj), def.strategy.validate(&obj))?;
        let token = token_review_token(&obj)?.to_owned();
        let audiences = token_review_audiences(&obj);
        let reviewed = self.authenticator().review_token(&token, &audiences).await;
        match reviewed {
            Ok(found) => token_review_status(&mut obj, found.as_ref(), None),
            Err(why) => token_review_status(&mut obj, None, Some(&why)),
        }
        Ok(obj)
    }
}

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
    ) -> Option<Result<Value>> {
        Some(registry.create_token_review(def, obj.clone()).await)
    }
}
