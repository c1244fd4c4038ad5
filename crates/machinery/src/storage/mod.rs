//! Storage helpers shared by the controllers and the scheduler, as upstream's
//! `k8s.io/component-helpers/storage`.

pub mod ephemeral;
pub mod volume;
