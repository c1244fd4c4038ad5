//! Reinvocation of the mutating phase (upstream's `admission.ReinvocationContext` and the mutating webhooks' `webhookReinvokeContext`): when a webhook changed the object, the mutating plugins run once more, and with them the `reinvocationPolicy: IfNeeded` webhooks called before the change.

use std::collections::BTreeSet;

use serde_json::Value;

/// The state of one request's reinvocation, carried in its attributes.
#[derive(Debug, Default)]
pub struct Reinvocation {
    /// Whether the mutating phase is running its second (last) round.
    is_reinvoke: bool,
    /// Whether a second round is needed (a webhook changed the object).
    should_reinvoke: bool,
    /// The object as the mutating webhooks left it last (a change since means in-tree plugins
    /// of the second round changed it, and the `IfNeeded` webhooks must see it again).
    last_webhook_output: Option<Value>,
    /// `IfNeeded` webhooks called so far whose view of the object is not outdated yet.
    previously_invoked: BTreeSet<String>,
    /// Webhooks to call in the second round.
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

    /// Whether the webhook with `uid` is called in the second round.
    pub fn should_reinvoke_webhook(&self, uid: &str) -> bool {
        self.reinvoke.contains(uid)
    }

    /// Whether `object` differs from what the webhooks left last.
    pub fn output_changed_since_last_webhook(&self, object: Option<&Value>) -> bool {
        self.last_webhook_output.as_ref() != object
    }

    /// Records what the webhooks left.
    pub fn set_last_webhook_output(&mut self, object: Option<&Value>) {
        self.last_webhook_output = object.cloned();
    }

    /// Records an `IfNeeded` webhook as called.
    pub fn add_reinvocable_webhook(&mut self, uid: &str) {
        self.previously_invoked.insert(uid.to_owned());
    }

    /// The object changed after the `IfNeeded` webhooks called so far saw it: they are
    /// called again in the second round.
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
    /// `IfNeeded` webhooks invoked before a change are reinvoked.
    #[test]
    fn only_webhooks_called_before_a_change_are_reinvoked() {
        let mut r = Reinvocation::default();
        r.add_reinvocable_webhook("a");
        r.require_reinvoking_previously_invoked();
        r.add_reinvocable_webhook("b");
        r.set_should_reinvoke();
        assert!(r.should_reinvoke());
        assert!(r.should_reinvoke_webhook("a"));
        assert!(!r.should_reinvoke_webhook("b"));

        let obj = json!({"a": 1});
        r.set_last_webhook_output(Some(&obj));
        assert!(!r.output_changed_since_last_webhook(Some(&obj)));
        assert!(r.output_changed_since_last_webhook(Some(&json!({"a": 2}))));
    }
}
