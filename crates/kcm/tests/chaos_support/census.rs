//! A watcher that counts the live pods of each app and ReplicaSet, relisting whenever its watch breaks, and records every time a count exceeds its bound.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, WatchEvent, WatchParams};
use tokio_util::sync::CancellationToken;

/// The label every pod of a chaos Deployment carries (`app=NAME`).
pub const APP_LABEL: &str = "app";

/// One pod as the census sees it.
#[derive(Clone, Debug)]
struct Seen {
    app: String,
    owner: String,
    /// Neither terminating nor finished: what a controller counts as active.
    live: bool,
}

#[derive(Default)]
struct State {
    /// Pods by uid, as of the last list plus the watch events since.
    pods: HashMap<String, Seen>,
    /// The most live pods an app may have at any moment (`replicas + maxSurge`).
    bounds: HashMap<String, usize>,
    /// The most live pods seen per app.
    max_live: BTreeMap<String, usize>,
    /// The most live pods seen per ReplicaSet.
    max_live_per_owner: BTreeMap<String, usize>,
    /// Every pod uid ever seen, per app.
    ever: HashMap<String, HashSet<String>>,
    /// What exceeded a bound, and when (as a list of counts).
    violations: Vec<String>,
    /// How many times the census listed (1 + its relists).
    lists: u64,
}

impl State {
    fn apply(&mut self, pod: &Pod, deleted: bool) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        let Some(app) = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(APP_LABEL))
            .cloned()
        else {
            return;
        };
        self.ever
            .entry(app.clone())
            .or_default()
            .insert(uid.clone());
        if deleted {
            self.pods.remove(&uid);
            return;
        }
        let owner = pod
            .metadata
            .owner_references
            .as_ref()
            .and_then(|refs| refs.iter().find(|r| r.controller == Some(true)))
            .map(|r| r.name.clone())
            .unwrap_or_default();
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let live = pod.metadata.deletion_timestamp.is_none()
            && !matches!(phase, Some("Succeeded") | Some("Failed"));
        self.pods.insert(uid, Seen { app, owner, live });
    }

    /// Records the live counts and any that exceed their bound.
    fn check(&mut self, context: &str) {
        let mut per_app: BTreeMap<&str, usize> = BTreeMap::new();
        let mut per_owner: BTreeMap<&str, usize> = BTreeMap::new();
        for seen in self.pods.values().filter(|s| s.live) {
            *per_app.entry(&seen.app).or_default() += 1;
            *per_owner.entry(&seen.owner).or_default() += 1;
        }
        for (app, live) in &per_app {
            let max = self.max_live.entry((*app).to_owned()).or_default();
            *max = (*max).max(*live);
            if let Some(bound) = self.bounds.get(*app)
                && live > bound
            {
                self.violations.push(format!(
                    "{app}: {live} live pods > {bound} ({context}; per ReplicaSet {per_owner:?})"
                ));
            }
        }
        for (owner, live) in per_owner {
            let max = self.max_live_per_owner.entry(owner.to_owned()).or_default();
            *max = (*max).max(live);
        }
    }
}

/// Counts the live pods in a namespace, per app and per ReplicaSet, from list + watch.
pub struct Census {
    state: Arc<Mutex<State>>,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Census {
    /// Starts watching the pods of `namespace` through `client` (which may lose its server at
    /// any time: every failure relists).
    pub fn start(client: kube::Client, namespace: &str) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let stop = CancellationToken::new();
        let pods: Api<Pod> = Api::namespaced(client, namespace);
        let task = tokio::spawn(run(pods, Arc::clone(&state), stop.clone()));
        Self {
            state,
            stop,
            task: Some(task),
        }
    }

    /// From now on, `app` may have at most `bound` live pods.
    pub fn bound(&self, app: &str, bound: usize) {
        let mut state = self.state.lock().expect("census");
        state.bounds.insert(app.to_owned(), bound);
    }

    /// How many distinct pods of `app` the census has seen.
    pub fn ever(&self, app: &str) -> usize {
        let state = self.state.lock().expect("census");
        state.ever.get(app).map_or(0, HashSet::len)
    }

    /// The most live pods of `app` seen at once.
    pub fn max_live(&self, app: &str) -> usize {
        let state = self.state.lock().expect("census");
        state.max_live.get(app).copied().unwrap_or_default()
    }

    /// How many times the census listed.
    pub fn lists(&self) -> u64 {
        self.state.lock().expect("census").lists
    }

    /// Stops the census; panics if any app ever exceeded its bound.
    pub async fn finish(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        let state = self.state.lock().expect("census");
        assert!(
            state.violations.is_empty(),
            "over-creation seen by the census ({} times), first ones:\n{}",
            state.violations.len(),
            state
                .violations
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

impl Drop for Census {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn run(pods: Api<Pod>, state: Arc<Mutex<State>>, stop: CancellationToken) {
    let selector = ListParams::default().labels(APP_LABEL);
    while !stop.is_cancelled() {
        let list = tokio::select! {
            () = stop.cancelled() => return,
            list = pods.list(&selector) => list,
        };
        let Ok(list) = list else {
            // The server is away (restarting): try again shortly.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let rv = list.metadata.resource_version.clone().unwrap_or_default();
        {
            let mut state = state.lock().expect("census");
            state.lists += 1;
            state.pods.clear();
            for pod in &list.items {
                state.apply(pod, false);
            }
            state.check("after a list");
        }
        let params = WatchParams::default().labels(APP_LABEL).timeout(290);
        let Ok(stream) = pods.watch(&params, &rv).await else {
            continue;
        };
        let mut stream = stream.boxed();
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => return,
                event = stream.try_next() => event,
            };
            let mut state = state.lock().expect("census");
            match event {
                Ok(Some(WatchEvent::Added(pod))) | Ok(Some(WatchEvent::Modified(pod))) => {
                    state.apply(&pod, false);
                }
                Ok(Some(WatchEvent::Deleted(pod))) => state.apply(&pod, true),
                Ok(Some(WatchEvent::Bookmark(_))) => continue,
                // Expired, closed or failed: relist.
                Ok(Some(WatchEvent::Error(_))) | Ok(None) | Err(_) => break,
            }
            state.check("after a watch event");
        }
    }
}
