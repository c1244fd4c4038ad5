//! Watch: storage events turned into Kubernetes watch events (ADDED/MODIFIED/DELETED/BOOKMARK/ERROR), filtered by selectors.
//!
//! As upstream's cacher watch: from `resourceVersion=N` every change after N; unset or `0`
//! first replays the current state as ADDED; an object entering or leaving the selector
//! arrives as ADDED or DELETED; DELETED carries the last state at the deletion's revision;
//! BOOKMARKs only when asked for; a too-old N is an ERROR event with a 410 `Expired` Status.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{FutureExt, StreamExt};
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::error::{ApiError, Result};
use crate::registry::event_cache::EventCache;
use crate::registry::list::ListOptions;
use crate::registry::resource::ResourceDef;
use crate::registry::{DefRef, Registry, decode_stored, parse_resource_version};
use crate::storage::{self, Event, Revision};

/// Upstream's minimum request timeout: watches without `timeoutSeconds` last between this
/// and twice this (`--min-request-timeout`, 1800 s).
const MIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(1800);

/// Encoded events buffered per watcher before the watch applies backpressure to the store.
const WATCH_BUFFER: usize = 128;

/// How long a watch waits for its client to take one more event before it ends: a client
/// that does not read is dropped after a bounded backlog (upstream's cacher likewise closes a
/// watcher that does not keep up), releasing its place in the store's fan-out.
const WATCH_SEND_TIMEOUT: Duration = Duration::from_secs(60);

/// The annotation on the BOOKMARK that ends `sendInitialEvents`' initial ADDED events.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// Server-wide settings of watches.
#[derive(Clone, Debug)]
pub struct WatchSettings {
    /// How often a watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// Ends every watch when the server shuts down.
    pub shutdown: CancellationToken,
}

/// One encoded watch event line (`{"type":...,"object":...}\n`).
pub type EncodedEvent = Bytes;

/// Encodes a watch event as one JSON line.
pub fn encode_event(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// Where a watch starts.
enum Start {
    /// Replay the state at the latest revision as ADDED, then follow (`rv` unset or `0`);
    /// with `end_bookmark`, a BOOKMARK annotated `k8s.io/initial-events-end` follows the replay.
    Initial { end_bookmark: bool },
    /// Every change after this revision.
    After(Revision),
    /// Only changes after the latest revision.
    Now,
}

impl Registry {
    /// Starts a watch and returns the receiver of its encoded event lines. The watch runs on
    /// its own task until `timeoutSeconds`, a store error, server shutdown, or the receiver
    /// being dropped (the client went away).
    pub async fn watch(
        self: &Arc<Self>,
        def: DefRef,
        namespace: Option<String>,
        opts: ListOptions,
        settings: WatchSettings,
    ) -> Result<mpsc::Receiver<EncodedEvent>> {
        opts.validate()?;
        let rv = parse_resource_version(&opts.resource_version)?;
        let start = match (opts.send_initial_events, rv) {
            (Some(true), _) => Start::Initial { end_bookmark: true },
            (Some(false), None | Some(0)) => Start::Now,
            (None, None | Some(0)) => Start::Initial {
                end_bookmark: false,
            },
            (_, Some(n)) => Start::After(n),
        };
        let namespace = namespace.or_else(|| {
            opts.field_selector
                .required_value("metadata.namespace")
                .filter(|ns| !ns.is_empty() && def.namespaced)
                .map(str::to_owned)
        });
        let prefix = def.storage_prefix(namespace.as_deref());
        let timeout = match opts.timeout_seconds {
            Some(t) if t > 0 => Duration::from_secs(t.unsigned_abs()),
            _ => {
                let factor: f64 = rand::rng().random_range(1.0..2.0);
                MIN_REQUEST_TIMEOUT.mul_f64(factor)
            }
        };
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        let registry = Arc::clone(self);
        tokio::spawn(async move {
            let deadline = tokio::time::sleep(timeout);
            let run = registry.run_watch(&def, prefix, start, opts, &settings, &tx);
            tokio::select! {
                _ = run => {}
                _ = deadline => {}
                _ = settings.shutdown.cancelled() => {}
                _ = tx.closed() => {}
            }
        });
        Ok(rx)
    }

    async fn run_watch(
        &self,
        def: &ResourceDef,
        prefix: String,
        start: Start,
        opts: ListOptions,
        settings: &WatchSettings,
        tx: &mpsc::Sender<EncodedEvent>,
    ) {
        let bookmark = |rev: Revision, end_of_initial: bool| {
            let mut metadata = json!({"resourceVersion": rev.to_string()});
            if end_of_initial {
                metadata["annotations"] = json!({INITIAL_EVENTS_END_ANNOTATION: "true"});
            }
            encode_event(
                "BOOKMARK",
                &json!({"kind": def.kind, "apiVersion": def.api_version(), "metadata": metadata}),
            )
        };
        let error_event = |err: ApiError| encode_event("ERROR", &err.to_status());
        // Progress bookmarks are only sound for a watch that starts at or after the store's
        // progress point (its backlog then comes from memory, already queued); one that
        // starts earlier qualifies once it has caught up with that point.
        let progress_at_open = self.storage().progress_revision().await.unwrap_or(0);
        let mut last: Revision = match start {
            Start::After(n) => n,
            Start::Now => match self.storage().current_revision().await {
                Ok(r) => r,
                Err(e) => {
                    let _ = send(tx, error_event(ApiError::internal(e))).await;
                    return;
                }
            },
            Start::Initial { end_bookmark } => {
                let page = match self
                    .storage()
                    .list(storage::ListOptions {
                        prefix: prefix.clone(),
                        ..Default::default()
                    })
                    .await
                {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = send(tx, error_event(ApiError::internal(e))).await;
                        return;
                    }
                };
                for kv in &page.kvs {
                    let Ok(obj) = decode_stored(def, kv) else {
                        continue;
                    };
                    if opts.matches(&obj) && !send(tx, encode_event("ADDED", &obj)).await {
                        return;
                    }
                }
                if end_bookmark && !send(tx, bookmark(page.revision, true)).await {
                    return;
                }
                page.revision
            }
        };
        let mut caught_up = progress_at_open > 0 && last >= progress_at_open;
        let mut events = match self.storage().watch(&prefix, last).await {
            Ok(stream) => stream,
            Err(e) => {
                let _ = send(tx, error_event(watch_error(e, last))).await;
                return;
            }
        };
        let mut ticker = tokio::time::interval_at(
            tokio::time::Instant::now() + settings.bookmark_interval,
            settings.bookmark_interval,
        );
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // One store event (or the end of the stream) delivered; `false` ends the watch.
        let deliver = async |next: Option<storage::Result<Event>>, last: &mut Revision| {
            let event = match next {
                Some(Ok(ev)) => ev,
                Some(Err(e)) => {
                    let _ = send(tx, error_event(watch_error(e, *last))).await;
                    return false;
                }
                None => return false,
            };
            // A progress notification may name a revision below a future `after`.
            *last = (*last).max(event.revision());
            match convert_event(&self.events, def, &event, &opts) {
                Some(line) => send(tx, line).await,
                None => true,
            }
        };
        loop {
            tokio::select! {
                next = events.next() => {
                    if !deliver(next, &mut last).await {
                        return;
                    }
                    caught_up |= progress_at_open > 0 && last >= progress_at_open;
                }
                _ = ticker.tick(), if opts.allow_watch_bookmarks => {
                    // A bookmark never claims a revision this watch has not delivered up to:
                    // the store's progress revision counts only once every event up to it,
                    // already queued for this watch, has been delivered.
                    if caught_up
                        && let Ok(progress) = self.storage().progress_revision().await
                        && progress > last
                    {
                        while let Some(next) = events.next().now_or_never() {
                            if !deliver(next, &mut last).await {
                                return;
                            }
                        }
                        last = last.max(progress);
                    }
                    if last > 0 && !send(tx, bookmark(last, false)).await {
                        return;
                    }
                }
            }
        }
    }
}

/// Hands one encoded event to the client's side of the watch; `false` when the client went
/// away or has not taken anything for [`WATCH_SEND_TIMEOUT`].
async fn send(tx: &mpsc::Sender<EncodedEvent>, line: EncodedEvent) -> bool {
    matches!(
        tokio::time::timeout(WATCH_SEND_TIMEOUT, tx.send(line)).await,
        Ok(Ok(()))
    )
}

/// The API error a failed store watch is answered with (410 for compaction).
fn watch_error(e: storage::Error, requested: Revision) -> ApiError {
    match e {
        storage::Error::Compacted { compacted, .. } => ApiError::expired(format!(
            "too old resource version: {requested} ({compacted})"
        )),
        other => ApiError::internal(other),
    }
}

/// Turns one store event into the watch event this watcher sees, if any. Decoding and
/// encoding go through the shared `cache`, so a fan-out does the work once per event.
fn convert_event(
    cache: &EventCache,
    def: &ResourceDef,
    event: &Event,
    opts: &ListOptions,
) -> Option<Bytes> {
    if !opts.filters() {
        return convert_unfiltered(cache, def, event);
    }
    match event {
        Event::Put { kv, prev } => {
            let cur = cache.object(def, kv)?;
            let cur_matches = opts.matches(&cur);
            let prev_obj = match prev {
                Some(p) if opts.filters() => cache.object(def, p),
                _ => None,
            };
            let prev_matches = match (&prev_obj, prev) {
                (Some(p), _) => opts.matches(p),
                (None, Some(_)) => !opts.filters(),
                (None, None) => false,
            };
            let (kind, revision) = match (cur_matches, prev_matches) {
                (true, true) => ("MODIFIED", kv.mod_revision),
                (true, false) => ("ADDED", kv.mod_revision),
                (false, true) => ("DELETED", kv.mod_revision),
                (false, false) => return None,
            };
            Some(cache.line(def, &kv.key, revision, kind, || {
                if kind == "DELETED" {
                    // Leaving the selector: the previous state, at this event's revision.
                    let mut gone = prev_obj.as_deref().cloned().unwrap_or(Value::Null);
                    crate::object::set_resource_version(&mut gone, kv.mod_revision);
                    encode_event(kind, &gone)
                } else {
                    encode_event(kind, &cur)
                }
            }))
        }
        Event::Delete { revision, prev } => {
            let last = cache.object(def, prev)?;
            if !opts.matches(&last) {
                return None;
            }
            Some(cache.line(def, &prev.key, *revision, "DELETED", || {
                let mut gone = Value::clone(&last);
                crate::object::set_resource_version(&mut gone, *revision);
                encode_event("DELETED", &gone)
            }))
        }
        // Nothing to show; the caller moves its revision (and its next bookmark) up to it.
        Event::Progress { .. } => None,
    }
}

/// [`convert_event`] for a watcher without selectors: every event is its event, so only the
/// encoded line is looked up, and the decoded object (many times the size of its stored
/// bytes) lives only until that line is made instead of staying in the shared cache.
fn convert_unfiltered(cache: &EventCache, def: &ResourceDef, event: &Event) -> Option<Bytes> {
    match event {
        Event::Put { kv, prev } => {
            let kind = if prev.is_some() { "MODIFIED" } else { "ADDED" };
            cache.try_line(def, &kv.key, kv.mod_revision, kind, || {
                let cur = crate::registry::decode_stored(def, kv).ok()?;
                Some(encode_event(kind, &cur))
            })
        }
        Event::Delete { revision, prev } => {
            cache.try_line(def, &prev.key, *revision, "DELETED", || {
                let mut gone = crate::registry::decode_stored(def, prev).ok()?;
                crate::object::set_resource_version(&mut gone, *revision);
                Some(encode_event("DELETED", &gone))
            })
        }
        // Nothing to show, as in `convert_event`.
        Event::Progress { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::registry::field_selector::FieldSelector;
    use crate::resources::pod;
    use crate::storage::KeyValue;

    fn kv(name: &str, node: &str, rev: Revision) -> KeyValue {
        let obj =
            json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {"nodeName": node}});
        KeyValue {
            key: Arc::from(format!("/registry/core/pods/ns/{name}")),
            value: Bytes::from(serde_json::to_vec(&obj).expect("json")),
            create_revision: 1,
            mod_revision: rev,
        }
    }

    fn decode(line: &Bytes) -> Value {
        serde_json::from_slice(line).expect("json line")
    }

    #[test]
    fn selector_transitions() {
        let opts = ListOptions {
            field_selector: FieldSelector::parse("spec.nodeName=n1", &pod::PODS).expect("parses"),
            ..Default::default()
        };
        let s = &pod::PODS;
        struct Case {
            name: &'static str,
            event: Event,
            want: Option<(&'static str, &'static str)>,
        }
        let cases = [
            Case {
                name: "enters selector",
                event: Event::Put {
                    kv: kv("a", "n1", 5),
                    prev: Some(kv("a", "", 4)),
                },
                want: Some(("ADDED", "5")),
            },
            Case {
                name: "leaves selector",
                event: Event::Put {
                    kv: kv("a", "n2", 6),
                    prev: Some(kv("a", "n1", 5)),
                },
                want: Some(("DELETED", "6")),
            },
            Case {
                name: "stays in",
                event: Event::Put {
                    kv: kv("a", "n1", 7),
                    prev: Some(kv("a", "n1", 6)),
                },
                want: Some(("MODIFIED", "7")),
            },
            Case {
                name: "never matches",
                event: Event::Put {
                    kv: kv("a", "n3", 8),
                    prev: None,
                },
                want: None,
            },
            Case {
                name: "deleted at deletion revision",
                event: Event::Delete {
                    revision: 9,
                    prev: kv("a", "n1", 7),
                },
                want: Some(("DELETED", "9")),
            },
        ];
        for case in cases {
            let got =
                convert_event(&EventCache::new(16), s, &case.event, &opts).map(|l| decode(&l));
            let got = got.as_ref().map(|v| {
                (
                    v["type"].as_str().unwrap_or("").to_owned(),
                    v["object"]["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned(),
                )
            });
            let want = case.want.map(|(t, r)| (t.to_owned(), r.to_owned()));
            assert_eq!(got, want, "case {}", case.name);
        }
    }

    fn pod_bytes(name: &str, ns: &str, app: &str) -> Bytes {
        let obj = json!({"metadata": {"name": name, "namespace": ns, "labels": {"app": app}}});
        Bytes::from(serde_json::to_vec(&obj).expect("json"))
    }

    async fn next_bookmark(rx: &mut mpsc::Receiver<EncodedEvent>) -> Revision {
        let line = rx.recv().await.expect("watch open");
        let event = decode(&line);
        assert_eq!(event["type"], "BOOKMARK", "{event}");
        event["object"]["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|rv| rv.parse().ok())
            .expect("resourceVersion")
    }

    /// A quiet watch (its selector matches nothing, its namespace sees no writes) still gets
    /// bookmarks at the store's current revision, so a restarted informer resumes from there
    /// instead of from a revision that compaction will remove.
    #[tokio::test(start_paused = true)]
    async fn bookmarks_advance_while_nothing_watched_changes() {
        let registry = Arc::new(Registry::new(
            Arc::new(crate::storage::MemoryStorage::new()),
        ));
        let def = registry.lookup("", "v1", "pods").expect("pods served");
        let store = Arc::clone(registry.storage());
        let key = |ns: &str, name: &str| def.storage_key(ns, name);
        let rev = store
            .create(&key("quiet", "a"), pod_bytes("a", "quiet", "web"))
            .await
            .expect("create");
        let opts = ListOptions {
            resource_version: rev.to_string(),
            allow_watch_bookmarks: true,
            label_selector: Some(
                kcm_machinery::labels::Selector::parse("app=none").expect("selector"),
            ),
            ..Default::default()
        };
        let settings = WatchSettings {
            bookmark_interval: Duration::from_secs(1),
            shutdown: CancellationToken::new(),
        };
        let mut rx = registry
            .watch(def.clone(), Some("quiet".to_owned()), opts, settings)
            .await
            .expect("watch");
        // Writes elsewhere, and one in the namespace the selector does not match.
        for i in 0..3 {
            store
                .create(
                    &key("busy", &format!("b{i}")),
                    pod_bytes("b", "busy", "web"),
                )
                .await
                .expect("create");
        }
        let current = store
            .update(&key("quiet", "a"), rev, pod_bytes("a", "quiet", "api"))
            .await
            .expect("update");
        assert_eq!(next_bookmark(&mut rx).await, current);
        // Only writes elsewhere: the next bookmark still advances.
        let later = store
            .create(&key("busy", "c"), pod_bytes("c", "busy", "web"))
            .await
            .expect("create");
        assert_eq!(next_bookmark(&mut rx).await, later);
        assert!(later > current);
    }

    /// A client that takes nothing is dropped once its buffer has been full for the send
    /// timeout, and the store's fan-out forgets it.
    #[tokio::test(start_paused = true)]
    async fn a_watcher_that_never_reads_is_dropped() {
        let registry = Arc::new(Registry::new(
            Arc::new(crate::storage::MemoryStorage::new()),
        ));
        let def = registry.lookup("", "v1", "pods").expect("pods served");
        let store = Arc::clone(registry.storage());
        let settings = WatchSettings {
            bookmark_interval: Duration::from_secs(3600),
            shutdown: CancellationToken::new(),
        };
        let opts = ListOptions {
            resource_version: "0".to_owned(),
            timeout_seconds: Some(3600),
            ..Default::default()
        };
        let mut rx = registry
            .watch(def.clone(), None, opts, settings)
            .await
            .expect("watch");
        for i in 0..(WATCH_BUFFER + 10) {
            let name = format!("p{i}");
            store
                .create(&def.storage_key("ns", &name), pod_bytes(&name, "ns", "web"))
                .await
                .expect("create");
        }
        tokio::time::sleep(WATCH_SEND_TIMEOUT + Duration::from_secs(1)).await;
        // What was buffered is still readable, then the watch has ended.
        let mut got = 0;
        while rx.recv().await.is_some() {
            got += 1;
        }
        assert_eq!(got, WATCH_BUFFER);
    }

    #[test]
    fn unfiltered_put_is_added_or_modified() {
        let s = &pod::PODS;
        let opts = ListOptions::default();
        let added = convert_event(
            &EventCache::new(16),
            s,
            &Event::Put {
                kv: kv("a", "", 2),
                prev: None,
            },
            &opts,
        )
        .expect("event");
        assert_eq!(decode(&added)["type"], "ADDED");
        let modified = convert_event(
            &EventCache::new(16),
            s,
            &Event::Put {
                kv: kv("a", "", 3),
                prev: Some(kv("a", "", 2)),
            },
            &opts,
        )
        .expect("event");
        assert_eq!(decode(&modified)["type"], "MODIFIED");
    }

    #[test]
    fn unfiltered_fan_out_keeps_no_decoded_objects() {
        let s = &pod::PODS;
        let cache = EventCache::new(16);
        let opts = ListOptions::default();
        let put = Event::Put {
            kv: kv("a", "n1", 3),
            prev: Some(kv("a", "n1", 2)),
        };
        let first = convert_event(&cache, s, &put, &opts).expect("event");
        let second = convert_event(&cache, s, &put, &opts).expect("event");
        assert_eq!(first, second);
        let deleted = convert_event(
            &cache,
            s,
            &Event::Delete {
                revision: 4,
                prev: kv("a", "n1", 3),
            },
            &opts,
        )
        .expect("event");
        let deleted = decode(&deleted);
        assert_eq!(deleted["type"], "DELETED");
        assert_eq!(deleted["object"]["metadata"]["resourceVersion"], "4");
        assert_eq!(cache.objects_len(), 0);

        // A watcher with a selector shares the line and decodes what it has to match.
        let filtered = ListOptions {
            field_selector: FieldSelector::parse("spec.nodeName=n1", s).expect("parses"),
            ..Default::default()
        };
        let third = convert_event(&cache, s, &put, &filtered).expect("event");
        assert_eq!(third, first);
        assert!(cache.objects_len() > 0);
    }

    #[test]
    fn unfiltered_undecodable_event_is_skipped() {
        let mut bad = kv("a", "", 2);
        bad.value = Bytes::from_static(b"{nope");
        let event = Event::Put {
            kv: bad,
            prev: None,
        };
        let got = convert_event(
            &EventCache::new(16),
            &pod::PODS,
            &event,
            &ListOptions::default(),
        );
        assert_eq!(got, None);
    }
}
