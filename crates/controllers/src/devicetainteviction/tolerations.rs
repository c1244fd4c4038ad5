//! DRA device taints and tolerations: [`kcm_machinery::scheduling::device_taints`], shared with
//! the simulated scheduler's allocator.

pub use kcm_machinery::scheduling::device_taints::{
    EFFECT_NO_EXECUTE, EFFECT_NONE, tolerates_taint,
};
