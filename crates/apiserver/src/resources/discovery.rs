//! discovery.k8s.io/v1 endpointslices (written by the EndpointSlice controllers, read by service proxies).

use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::registry::generation::Generation;
use crate::registry::resource::ResourceDef;
use crate::resources::endpoint_slice::{self, EndpointSliceStrategy};
use crate::strategic_merge::kinds;
use crate::table::printers;

/// discovery.k8s.io/v1 endpointslices.
pub static ENDPOINT_SLICES: ResourceDef = ResourceDef::of::<EndpointSlice>()
    .generation(Generation::Spec)
    .decode_with(endpoint_slice::decode)
    .strategy(&EndpointSliceStrategy)
    .printer(printers::ENDPOINT_SLICE)
    .merge_schema(&kinds::METADATA_ONLY);
