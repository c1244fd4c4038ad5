//! Which hooks each [`Rest`] names: the one place the registry's resource-specific storage is
//! tied to the generic create, update and delete (see [`crate::registry::store_hooks`]).

use crate::registry::binding::BindingHooks;
use crate::registry::namespace::NamespaceHooks;
use crate::registry::resource::{ResourceDef, Rest};
use crate::registry::service_alloc::ServiceHooks;
use crate::registry::store_hooks::StoreHooks;
use crate::registry::token_review::TokenReviewHooks;

/// The hooks of `def`'s storage; `None` for the generic store alone.
pub(crate) fn of(def: &ResourceDef) -> Option<&'static dyn StoreHooks> {
    match def.rest {
        Rest::Generic => None,
        Rest::IpAndPortAllocation => Some(&ServiceHooks),
        Rest::BindPod => Some(&BindingHooks),
        Rest::ReviewToken => Some(&TokenReviewHooks),
        Rest::DeleteAfterFinalize => Some(&NamespaceHooks),
    }
}
