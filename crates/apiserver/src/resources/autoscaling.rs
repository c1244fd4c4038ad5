//! autoscaling horizontalpodautoscalers (`hpa`): v2, the stored and preferred version, and v1 over the same storage (behaviour in [`hpa`](crate::resources::hpa), conversion in [`hpa_conversion`](crate::resources::hpa_conversion)).

use k8s_openapi::api::autoscaling::{v1, v2};

use crate::registry::resource::{Conversion, ResourceDef};
use crate::registry::subresource::Subresource;
use crate::resources::hpa::{HpaStrategy, HpaVersion, decode_hpa_v1, decode_hpa_v2};
use crate::resources::hpa_conversion::{v1_to_v2, v2_to_v1};
use crate::strategic_merge::kinds;
use crate::table::printers;

/// autoscaling/v2 horizontalpodautoscalers: the stored version.
pub static HPAS_V2: ResourceDef = ResourceDef::of::<v2::HorizontalPodAutoscaler>()
    .short_names(&["hpa"])
    .categories(&["all"])
    .subresources(&[Subresource::Status])
    .decode_with(decode_hpa_v2)
    .strategy(&HpaStrategy(HpaVersion::V2))
    .printer(printers::HORIZONTAL_POD_AUTOSCALER)
    .merge_schema(&kinds::STATUS_CONDITIONS);

/// autoscaling/v1 horizontalpodautoscalers, stored as v2.
pub static HPAS_V1: ResourceDef = ResourceDef::of::<v1::HorizontalPodAutoscaler>()
    .short_names(&["hpa"])
    .categories(&["all"])
    .subresources(&[Subresource::Status])
    .stored_as(
        "autoscaling",
        "horizontalpodautoscalers",
        Conversion {
            to_storage: v1_to_v2,
            from_storage: v2_to_v1,
        },
    )
    .decode_with(decode_hpa_v1)
    .strategy(&HpaStrategy(HpaVersion::V1))
    .printer(printers::HORIZONTAL_POD_AUTOSCALER)
    .merge_schema(&kinds::METADATA_ONLY);
