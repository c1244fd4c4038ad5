//! Whether a request is selected by a webhook's `objectSelector`: the new or the old object's labels, as upstream's `predicates/object.Matcher`.

use kcm_machinery::labels::Selector;

use crate::admission::attributes::Attributes;
use crate::object;

/// Whether `selector` selects the request: an empty selector selects everything; otherwise
/// the new object's labels or the old object's labels must match (a request with neither
/// object is not selected).
pub fn matches(selector: &Selector, a: &Attributes<'_>) -> bool {
    if selector.is_everything() {
        return true;
    }
    let matches = |obj: &serde_json::Value| selector.matches(&object::labels(obj));
    a.object.as_ref().is_some_and(matches) || a.old_object.is_some_and(matches)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::admission::attributes::Operation;
    use crate::auth::user::UserInfo;
    use crate::resources::pod::PODS;

    fn labelled(labels: Value) -> Value {
        json!({"metadata": {"name": "p", "labels": labels}})
    }

    /// As upstream's `TestObjectSelector` table.
    #[test]
    fn new_or_old_labels_select() {
        struct Case {
            name: &'static str,
            selector: &'static str,
            object: Option<Value>,
            old: Option<Value>,
            want: bool,
        }
        let cases = [
            Case {
                name: "empty selector selects everything",
                selector: "",
                object: None,
                old: None,
                want: true,
            },
            Case {
                name: "new object matches",
                selector: "runlevel=0",
                object: Some(labelled(json!({"runlevel": "0"}))),
                old: None,
                want: true,
            },
            Case {
                name: "old object matches (a delete, or an update removing the label)",
                selector: "runlevel=0",
                object: Some(labelled(json!({}))),
                old: Some(labelled(json!({"runlevel": "0"}))),
                want: true,
            },
            Case {
                name: "neither matches",
                selector: "runlevel=0",
                object: Some(labelled(json!({"runlevel": "1"}))),
                old: Some(labelled(json!({}))),
                want: false,
            },
            Case {
                name: "no objects at all",
                selector: "runlevel=0",
                object: None,
                old: None,
                want: false,
            },
            Case {
                name: "not-in matches objects without the key",
                selector: "runlevel notin (0,1)",
                object: Some(labelled(json!({}))),
                old: None,
                want: true,
            },
        ];
        let user = UserInfo::admin();
        for case in cases {
            let selector = Selector::parse(case.selector).expect("selector");
            let a = Attributes::new(Operation::Update, &PODS, "ns", "p", case.object, &user)
                .with_old_object(case.old.as_ref());
            assert_eq!(matches(&selector, &a), case.want, "{}", case.name);
        }
    }
}
