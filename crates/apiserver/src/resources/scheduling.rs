//! scheduling.k8s.io/v1 priorityclasses (`pc`), with the system classes created at start (behaviour in [`priority_class`](crate::resources::priority_class)).

use k8s_openapi::api::scheduling::v1::PriorityClass;

use crate::registry::generation::Generation;
use crate::registry::resource::ResourceDef;
use crate::resources::priority_class::{
    PriorityClassStrategy, decode_priority_class, system_priority_classes,
};
use crate::strategic_merge::kinds;
use crate::table::printers;

/// The priorityclasses resource.
pub static PRIORITY_CLASSES: ResourceDef = ResourceDef::of::<PriorityClass>()
    .generation(Generation::CreateOnly)
    .short_names(&["pc"])
    .decode_with(decode_priority_class)
    .strategy(&PriorityClassStrategy)
    .bootstrap(|_| system_priority_classes())
    .printer(printers::PRIORITY_CLASS)
    .merge_schema(&kinds::METADATA_ONLY);
