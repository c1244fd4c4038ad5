//! List: `resourceVersion` semantics, label and field selectors, and `limit`/`continue` pagination from a fixed snapshot revision.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use kcm_machinery::labels::Selector;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::{ApiError, GroupKind, Result};
use crate::object;
use crate::registry::field_selector::FieldSelector;
use crate::registry::resource::ResourceDef;
use crate::registry::{Registry, decode_stored, parse_resource_version};
use crate::storage::{self, Revision};
use crate::validation::FieldError;

/// The smallest page read from the store when selectors may drop items, so that a small
/// `limit` with a selective filter does not take one store round trip per item.
const FILTERED_PAGE: usize = 256;

/// Upstream's message for an expired `continue` token.
pub const EXPIRED_CONTINUE_MESSAGE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// `metav1.ListOptions`: what a list or watch asks for.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    /// `labelSelector`, parsed.
    pub label_selector: Option<Selector>,
    /// `fieldSelector`, parsed against the resource's fields.
    pub field_selector: FieldSelector,
    /// `resourceVersion` as sent (`""` when absent).
    pub resource_version: String,
    /// `resourceVersionMatch` as sent (`""` when absent).
    pub resource_version_match: String,
    /// `limit` (0 = no limit).
    pub limit: i64,
    /// `continue` as sent (`""` when absent).
    pub continue_token: String,
    /// `watch=true`.
    pub watch: bool,
    /// `allowWatchBookmarks=true`.
    pub allow_watch_bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<i64>,
}

impl ListOptions {
    /// Whether `obj` passes both selectors.
    pub fn matches(&self, obj: &Value) -> bool {
        self.label_selector
            .as_ref()
            .is_none_or(|s| s.matches(&object::labels(obj)))
            && self.field_selector.matches(obj)
    }

    /// Whether any selector may drop objects.
    pub fn filters(&self) -> bool {
        self.label_selector
            .as_ref()
            .is_some_and(|s| !s.is_everything())
            || !self.field_selector.is_empty()
    }

    /// Validates the options (`ValidateListOptions`): 422 `ListOptions` errors.
    pub fn validate(&self) -> Result<()> {
        let mut errs = Vec::new();
        let m = self.resource_version_match.as_str();
        if self.watch {
            if let Some(initial) = self.send_initial_events {
                if m != "NotOlderThan" {
                    errs.push(FieldError::forbidden(
                        "resourceVersionMatch",
                        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    ));
                }
                if initial && !self.allow_watch_bookmarks {
                    errs.push(FieldError::forbidden(
                        "allowWatchBookmarks",
                        "allowWatchBookmarks must be set to true when sendInitialEvents is set to true",
                    ));
                }
            }
            if !m.is_empty() {
                if self.send_initial_events.is_none() {
                    errs.push(FieldError::forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    ));
                }
                if m != "NotOlderThan" {
                    errs.push(FieldError::not_supported(
                        "resourceVersionMatch",
                        m,
                        &["NotOlderThan"],
                    ));
                }
            }
        } else {
            if !m.is_empty() {
                if self.resource_version.is_empty() {
                    errs.push(FieldError::forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ));
                }
                if !self.continue_token.is_empty() {
                    errs.push(FieldError::forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
                if m != "Exact" && m != "NotOlderThan" {
                    errs.push(FieldError::not_supported(
                        "resourceVersionMatch",
                        m,
                        &["Exact", "NotOlderThan", ""],
                    ));
                }
                if m == "Exact" && self.resource_version == "0" {
                    errs.push(FieldError::forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    ));
                }
            }
            if self.send_initial_events.is_some() {
                errs.push(FieldError::forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for list",
                ));
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(
                GroupKind {
                    group: "meta.k8s.io",
                    kind: "ListOptions",
                },
                "",
                &errs,
            ))
        }
    }
}

/// The decoded `continue` token: upstream's `continueToken` (`{"v","rv","start"}`, base64url).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct ContinueToken {
    /// Always `meta.k8s.io/v1`.
    v: String,
    /// The snapshot revision; -1 means "latest" (a token handed out with a 410).
    rv: i64,
    /// The key to continue from, relative to the list's prefix.
    start: String,
}

/// Encodes a token continuing after `last_key` (a full key under `prefix`) at `revision`.
fn encode_continue(prefix: &str, last_key: &str, revision: Revision) -> String {
    let relative = last_key.strip_prefix(prefix).unwrap_or(last_key);
    // "\0" makes `start` the smallest key after `last_key`, as upstream.
    let token = ContinueToken {
        v: "meta.k8s.io/v1".to_owned(),
        rv: revision,
        start: format!("{relative}\u{0}"),
    };
    let json = serde_json::to_vec(&token).unwrap_or_default();
    URL_SAFE_NO_PAD.encode(json)
}

/// Decodes a token into (key to start after, revision); `None` revision reads the latest.
fn decode_continue(prefix: &str, token: &str) -> Result<(String, Option<Revision>)> {
    let invalid = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
    let raw = URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|e| invalid(&e.to_string()))?;
    let t: ContinueToken = serde_json::from_slice(&raw).map_err(|e| invalid(&e.to_string()))?;
    if t.v != "meta.k8s.io/v1" {
        return Err(invalid(
            "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    if t.rv == 0 || t.rv < -1 {
        return Err(invalid(
            "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    if t.start.is_empty() || t.start.starts_with('/') || t.start.split('/').any(|s| s == "..") {
        return Err(invalid("continue key is not valid"));
    }
    let relative = t.start.strip_suffix('\u{0}').unwrap_or(&t.start);
    let revision = if t.rv == -1 { None } else { Some(t.rv) };
    Ok((format!("{prefix}{relative}"), revision))
}

impl Registry {
    /// Lists objects in `namespace` (`None`: all namespaces, or a cluster-scoped resource).
    /// Returns the `{Kind}List` object.
    pub async fn list(
        &self,
        def: &ResourceDef,
        namespace: Option<&str>,
        opts: &ListOptions,
    ) -> Result<Value> {
        if let Some(computed) = def.computed_by() {
            // Computed on read: no revision, no pages; empty list metadata, as upstream's
            // componentstatuses list.
            opts.validate()?;
            let items: Vec<Value> = computed
                .objects(&self.view())
                .await?
                .into_iter()
                .filter(|o| namespace.is_none_or(|ns| crate::object::namespace(o) == ns))
                .filter(|o| opts.matches(o))
                .collect();
            return Ok(json!({
                "kind": format!("{}List", def.kind),
                "apiVersion": def.api_version(),
                "metadata": {},
                "items": items,
            }));
        }
        opts.validate()?;
        let gr = def.group_resource();
        // A `metadata.namespace=x` field selector narrows an all-namespaces list to one prefix.
        let namespace = namespace.or_else(|| {
            opts.field_selector
                .required_value("metadata.namespace")
                .filter(|ns| !ns.is_empty() && def.namespaced)
        });
        let prefix = def.storage_prefix(namespace);
        let (mut cursor, mut revision) = if opts.continue_token.is_empty() {
            (None, self.list_revision(opts).await?)
        } else {
            if !opts.resource_version.is_empty() && opts.resource_version != "0" {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            let (start, rev) = decode_continue(&prefix, &opts.continue_token)?;
            (Some(start), rev)
        };
        let limit = usize::try_from(opts.limit).ok().filter(|l| *l > 0);
        let mut items = Vec::new();
        // Where the next page starts: the last key returned, the snapshot revision, and how
        // many stored objects follow it.
        let mut next: Option<(String, Revision, u64)> = None;
        let read_revision;
        loop {
            let page_size = limit.map(|l| {
                let remaining = l - items.len();
                if opts.filters() {
                    remaining.max(FILTERED_PAGE)
                } else {
                    remaining
                }
            });
            let page = self
                .storage()
                .list(storage::ListOptions {
                    prefix: prefix.clone(),
                    start_after: cursor.clone(),
                    revision,
                    limit: page_size,
                })
                .await
                .map_err(|e| match e {
                    storage::Error::Compacted { .. } if !opts.continue_token.is_empty() => {
                        let mut err = ApiError::expired(EXPIRED_CONTINUE_MESSAGE);
                        if let Some(start) = &cursor {
                            let token = ContinueToken {
                                v: "meta.k8s.io/v1".to_owned(),
                                rv: -1,
                                start: format!(
                                    "{}\u{0}",
                                    start.strip_prefix(&prefix).unwrap_or(start)
                                ),
                            };
                            err.continue_token = serde_json::to_vec(&token)
                                .ok()
                                .map(|j| URL_SAFE_NO_PAD.encode(j));
                        }
                        err
                    }
                    other => ApiError::from_storage(other, gr, ""),
                })?;
            // Every further page reads the same snapshot.
            revision = Some(page.revision);
            let count = page.kvs.len();
            let mut full = false;
            for (i, kv) in page.kvs.iter().enumerate() {
                cursor = Some(kv.key.to_string());
                let obj = decode_stored(def, kv)?;
                if opts.matches(&obj) {
                    items.push(obj);
                }
                if limit.is_some_and(|l| items.len() >= l) {
                    if i + 1 < count || page.more {
                        let after = (count - i - 1) as u64 + page.remaining;
                        next = Some((kv.key.to_string(), page.revision, after));
                    }
                    full = true;
                    break;
                }
            }
            if full || !page.more || count == 0 {
                read_revision = page.revision;
                break;
            }
        }
        let mut metadata = Map::new();
        metadata.insert(
            "resourceVersion".to_owned(),
            Value::String(read_revision.to_string()),
        );
        if let Some((last, rev, after)) = next {
            metadata.insert(
                "continue".to_owned(),
                Value::String(encode_continue(&prefix, &last, rev)),
            );
            // As upstream's `PrepareContinueToken`: the count is of stored objects, so it is
            // only given when no selector could have dropped some of them.
            if !opts.filters() {
                metadata.insert("remainingItemCount".to_owned(), Value::from(after));
            }
        }
        Ok(json!({
            "kind": format!("{}List", def.kind),
            "apiVersion": def.api_version(),
            "metadata": metadata,
            "items": items,
        }))
    }

    /// The revision a first page is read at: `None` (latest) unless `resourceVersion` with
    /// `resourceVersionMatch=Exact` pins one; `NotOlderThan` a future revision is a 504.
    async fn list_revision(&self, opts: &ListOptions) -> Result<Option<Revision>> {
        let Some(rv) = parse_resource_version(&opts.resource_version)? else {
            return Ok(None);
        };
        if rv == 0 {
            return Ok(None);
        }
        let current = self
            .storage()
            .current_revision()
            .await
            .map_err(|e| ApiError::from_storage(e, Default::default(), ""))?;
        if rv > current {
            return Err(ApiError::too_large_resource_version(rv, current));
        }
        if opts.resource_version_match == "Exact" {
            Ok(Some(rv))
        } else {
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_token_round_trip() {
        let prefix = "/registry/core/pods/";
        let token = encode_continue(prefix, "/registry/core/pods/ns/b", 42);
        let (start, rev) = decode_continue(prefix, &token).expect("decodes");
        assert_eq!(start, "/registry/core/pods/ns/b");
        assert_eq!(rev, Some(42));
        // The wire format is upstream's.
        let raw = URL_SAFE_NO_PAD.decode(&token).expect("base64");
        let json: Value = serde_json::from_slice(&raw).expect("json");
        assert_eq!(
            json,
            json!({"v": "meta.k8s.io/v1", "rv": 42, "start": "ns/b\u{0}"})
        );
    }

    #[test]
    fn bad_continue_tokens_are_rejected() {
        let prefix = "/registry/core/pods/";
        for (name, token) in [
            ("not base64", "%%%".to_owned()),
            ("not json", URL_SAFE_NO_PAD.encode("nope")),
            (
                "escapes prefix",
                URL_SAFE_NO_PAD.encode(r#"{"v":"meta.k8s.io/v1","rv":3,"start":"../x"}"#),
            ),
            (
                "zero rv",
                URL_SAFE_NO_PAD.encode(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#),
            ),
        ] {
            assert_eq!(
                decode_continue(prefix, &token).map_err(|e| e.code).err(),
                Some(400),
                "case {name}"
            );
        }
    }

    #[test]
    fn list_option_validation() {
        let cases = [
            ("plain", ListOptions::default(), true),
            (
                "match without rv",
                ListOptions {
                    resource_version_match: "Exact".to_owned(),
                    ..Default::default()
                },
                false,
            ),
            (
                "exact zero",
                ListOptions {
                    resource_version: "0".to_owned(),
                    resource_version_match: "Exact".to_owned(),
                    ..Default::default()
                },
                false,
            ),
            (
                "initial events on list",
                ListOptions {
                    send_initial_events: Some(true),
                    ..Default::default()
                },
                false,
            ),
            (
                "watch initial events",
                ListOptions {
                    watch: true,
                    send_initial_events: Some(true),
                    allow_watch_bookmarks: true,
                    resource_version_match: "NotOlderThan".to_owned(),
                    ..Default::default()
                },
                true,
            ),
            (
                "watch initial events without match",
                ListOptions {
                    watch: true,
                    send_initial_events: Some(true),
                    allow_watch_bookmarks: true,
                    ..Default::default()
                },
                false,
            ),
        ];
        for (name, opts, ok) in cases {
            assert_eq!(opts.validate().is_ok(), ok, "case {name}");
        }
    }
}

/// Lists and gets of a resource computed on read.
#[cfg(test)]
mod computed_tests {
    use std::sync::Arc;

    use futures::FutureExt;
    use futures::future::BoxFuture;
    use k8s_openapi::api::core::v1::ComponentStatus;
    use kcm_machinery::labels::Selector;
    use serde_json::json;

    use crate::error::Result;
    use crate::registry::Registry;
    use crate::registry::computed::{Computed, ServerView};
    use crate::registry::list::ListOptions;
    use crate::registry::resource::{ResourceDef, Verbs};
    use crate::storage::MemoryStorage;
    use crate::strategic_merge::kinds;
    use crate::table::printers;
    use serde_json::Value;

    /// Two objects, one labelled.
    struct Two;

    impl Computed for Two {
        fn objects<'a>(&'a self, _: &'a ServerView<'a>) -> BoxFuture<'a, Result<Vec<Value>>> {
            async {
                Ok(vec![
                    json!({"apiVersion": "v1", "kind": "ComponentStatus",
                        "metadata": {"name": "a", "labels": {"tier": "store"}}}),
                    json!({"apiVersion": "v1", "kind": "ComponentStatus", "metadata": {"name": "b"}}),
                ])
            }
            .boxed()
        }
    }

    static TWO: ResourceDef = ResourceDef::of::<ComponentStatus>()
        .computed(&Two)
        .printer(printers::GENERIC)
        .merge_schema(&kinds::METADATA_ONLY);
    static ALL: &[&ResourceDef] = &[&TWO];

    #[tokio::test]
    async fn get_and_list_read_the_computed_objects_and_write_nothing() {
        let storage = Arc::new(MemoryStorage::new());
        let registry = Registry::with_resources(storage.clone(), ALL);
        assert_eq!(TWO.verbs, Verbs::READ_ONLY);
        assert!(!TWO.is_stored());

        let a = registry.get(&TWO, "", "a").await.expect("get a");
        assert_eq!(a["metadata"]["labels"]["tier"], "store");
        let missing = registry.get(&TWO, "", "c").await.expect_err("c");
        assert_eq!(missing.code, 404);

        let all = registry
            .list(&TWO, None, &ListOptions::default())
            .await
            .expect("list");
        assert_eq!(all["kind"], "ComponentStatusList");
        assert_eq!(all["items"].as_array().map(Vec::len), Some(2));
        assert_eq!(all["metadata"], json!({}));
        let selected = ListOptions {
            label_selector: Some(Selector::parse("tier=store").expect("selector")),
            ..ListOptions::default()
        };
        let store = registry.list(&TWO, None, &selected).await.expect("list");
        assert_eq!(store["items"][0]["metadata"]["name"], "a");
        assert_eq!(store["items"].as_array().map(Vec::len), Some(1));

        use crate::storage::Storage;
        assert_eq!(storage.current_revision().await.expect("revision"), 0);
    }
}
