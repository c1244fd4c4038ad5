//! Node taints and the pod tolerations that match them: [`taint`] and [`toleration`].

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Builds a [`Taint`]. Start with [`taint`].
#[derive(Clone, Debug, Default)]
pub struct TaintBuilder {
    taint: Taint,
}

/// A taint of `key` with `effect` (`"NoSchedule"`, `"PreferNoSchedule"`, `"NoExecute"`); no
/// value, no time added.
pub fn taint(key: &str, effect: &str) -> TaintBuilder {
    TaintBuilder {
        taint: Taint {
            key: key.to_owned(),
            effect: effect.to_owned(),
            ..Taint::default()
        },
    }
}

impl TaintBuilder {
    /// Sets `value`.
    pub fn value(mut self, value: &str) -> Self {
        self.taint.value = Some(value.to_owned());
        self
    }

    /// Sets `timeAdded`.
    pub fn added_at(mut self, at: Timestamp) -> Self {
        self.taint.time_added = Some(Time(at));
        self
    }

    /// The taint.
    pub fn build(self) -> Taint {
        self.taint
    }
}

/// Builds a [`Toleration`]. Start with [`toleration`]; `TolerationBuilder::default()` has
/// every field unset (an empty key with `Exists` tolerates everything).
#[derive(Clone, Debug, Default)]
pub struct TolerationBuilder {
    toleration: Toleration,
}

/// A toleration of `key`; no operator, value, effect or time limit.
pub fn toleration(key: &str) -> TolerationBuilder {
    TolerationBuilder {
        toleration: Toleration {
            key: Some(key.to_owned()),
            ..Toleration::default()
        },
    }
}

impl TolerationBuilder {
    /// Sets `operator`.
    pub fn operator(mut self, operator: &str) -> Self {
        self.toleration.operator = Some(operator.to_owned());
        self
    }

    /// Operator `Exists`: any value of the key.
    pub fn exists(self) -> Self {
        self.operator("Exists")
    }

    /// Operator `Equal` with `value`.
    pub fn equal(self, value: &str) -> Self {
        self.operator("Equal").value(value)
    }

    /// Sets `value`.
    pub fn value(mut self, value: &str) -> Self {
        self.toleration.value = Some(value.to_owned());
        self
    }

    /// Sets `effect`.
    pub fn effect(mut self, effect: &str) -> Self {
        self.toleration.effect = Some(effect.to_owned());
        self
    }

    /// Sets `tolerationSeconds` (how long a `NoExecute` taint is tolerated).
    pub fn seconds(mut self, seconds: i64) -> Self {
        self.toleration.toleration_seconds = Some(seconds);
        self
    }

    /// The toleration.
    pub fn build(self) -> Toleration {
        self.toleration
    }
}

from_builder!(TaintBuilder => Taint, TolerationBuilder => Toleration);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taint_defaults_to_key_and_effect() {
        assert_eq!(
            taint("k", "NoExecute").build(),
            Taint {
                key: "k".into(),
                effect: "NoExecute".into(),
                value: None,
                time_added: None,
            }
        );
        let at = Timestamp::UNIX_EPOCH;
        let t = taint("k", "NoSchedule").value("v").added_at(at).build();
        assert_eq!(t.value.as_deref(), Some("v"));
        assert_eq!(t.time_added, Some(Time(at)));
    }

    #[test]
    fn toleration_defaults_to_its_key() {
        assert_eq!(
            toleration("k").build(),
            Toleration {
                key: Some("k".into()),
                ..Toleration::default()
            }
        );
        assert_eq!(TolerationBuilder::default().build(), Toleration::default());
    }

    #[test]
    fn toleration_setters() {
        let t = toleration("k")
            .equal("v")
            .effect("NoExecute")
            .seconds(30)
            .build();
        assert_eq!(t.operator.as_deref(), Some("Equal"));
        assert_eq!(t.value.as_deref(), Some("v"));
        assert_eq!(t.effect.as_deref(), Some("NoExecute"));
        assert_eq!(t.toleration_seconds, Some(30));
        assert_eq!(
            toleration("k").exists().build().operator.as_deref(),
            Some("Exists")
        );
    }
}
