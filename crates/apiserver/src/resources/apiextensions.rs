//! apiextensions.k8s.io/v1 customresourcedefinitions (+status): the definitions the API server serves custom resources from (see [`crate::apiextensions`]).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::apiextensions::crd_strategy::{self, CrdStrategy};
use crate::registry::generation::Generation;
use crate::registry::resource::ResourceDef;
use crate::registry::subresource::Subresource;
use crate::strategic_merge::kinds;
use crate::table::printers;

/// apiextensions.k8s.io/v1 customresourcedefinitions.
pub static CUSTOM_RESOURCE_DEFINITIONS: ResourceDef = ResourceDef::of::<CustomResourceDefinition>()
    .generation(Generation::Spec)
    .short_names(&["crd", "crds"])
    .categories(&["api-extensions"])
    .subresources(&[Subresource::Status])
    .decode_with(crd_strategy::decode)
    .strategy(&CrdStrategy)
    .printer(printers::GENERIC)
    .merge_schema(&kinds::METADATA_ONLY);
