//! Reinvocation of the mutating phase (upstream's `admission.ReinvocationContext`, with the mutating webhooks' `webhookReinvokeContext` and the mutating policies' `policyReinvokeContext`): when a webhook or a policy changed the object, the mutating plugins run once more, and with them the `reinvocationPolicy: IfNeeded` webhooks and policies invoked before the change.

use std::collections::BTreeSet;

use serde_json::Value;

/// The state of one request's reinvocation, carried in its attributes.
#[derive(Debug, Default)]
pub struct Reinvocation {
    /// Whether the mutating phase is running its second (last) round.
    is_reinvoke: bool,
    /// Whether a second round is needed (a webhook or a policy changed the object).
    should_reinvoke: bool,
    /// The mutating webhooks' invocations (keyed by webhook uid).
    pub webhooks: Invocations,
    /// The mutating admission policies' invocations (keyed by policy, binding and param).
    pub policies: Invocations,
}

/// One plugin's reinvocation bookkeeping: which of its `IfNeeded` hooks run again.
#[derive(Debug, Default)]
pub struct Invocations {
    /// The object as the plugin left it last (a change since means other plugins changed
    /// it after, and the `IfNeeded` hooks must see it again).
    last_output: Option<Value>,
    /// `IfNeeded` hooks invoked so far whose view of the object is not outdated yet.
    previously_invoked: BTreeSet<String>,
    /// Hooks to invoke in the second round.
    reinvoke: BTreeSet<String>,
}

impl Reinvocation {
    /// Whether this is the second round.
    pub fn is_reinvoke(&self) -> bool {
        self.is_reinvoke
    }

    /// Whether a second round was asked for.
    pub fn should_reinvoke(&self) -> bool {
        self.should_reinvoke
    }

    /// Asks for a second round.
    pub fn set_should_reinvoke(&mut self) {
        self.should_reinvoke = true;
    }

    /// Starts the second round.
    pub fn set_is_reinvoke(&mut self) {
        self.is_reinvoke = true;
    }
}

impl Invocations {
    /// Whether the hook `key` is invoked in the second round.
    pub fn should_reinvoke(&self, key: &str) -> bool {
        self.reinvoke.contains(key)
    }

    /// Whether `object` differs from what the plugin left last.
    pub fn output_changed_since_last(&self, object: Option<&Value>) -> bool {
        self.last_output.as_ref() != object
    }

    /// Records what the plugin left.
    pub fn set_last_output(&mut self, object: Option<&Value>) {
        self.last_output = object.cloned();
    }

    /// Records an `IfNeeded` hook as invoked.
    pub fn add_reinvocable(&mut self, key: &str) {
        self.previously_invoked.insert(key.to_owned());
    }

    /// The object changed after the `IfNeeded` hooks invoked so far saw it: they are
    /// invoked again in the second round.
    pub fn require_reinvoking_previously_invoked(&mut self) {
        let invoked = std::mem::take(&mut self.previously_invoked);
        self.reinvoke.extend(invoked);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// As upstream's `TestFullReinvocation`/`TestPartialReinvocation` bookkeeping: only
    /// `IfNeeded` hooks invoked before a change are reinvoked.
    #[test]
    fn only_hooks_invoked_before_a_change_are_reinvoked() {
        let mut r = Reinvocation::default();
        r.webhooks.add_reinvocable("a");
        r.webhooks.require_reinvoking_previously_invoked();
        r.webhooks.add_reinvocable("b");
        r.set_should_reinvoke();
        assert!(r.should_reinvoke());
        assert!(r.webhooks.should_reinvoke("a"));
        assert!(!r.webhooks.should_reinvoke("b"));
        assert!(
            !r.policies.should_reinvoke("a"),
            "each plugin keeps its own"
        );

        let obj = json!({"a": 1});
        r.webhooks.set_last_output(Some(&obj));
        assert!(!r.webhooks.output_changed_since_last(Some(&obj)));
        assert!(r.webhooks.output_changed_since_last(Some(&json!({"a": 2}))));
    }
}
