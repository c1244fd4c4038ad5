//! The set of served resources: the built-in `static` entries plus the custom resources' entries built at run time, read per request as a cheap snapshot.
//!
//! Built-in entries never change, so a request to one finds it in the `static` table with no
//! lock and no reference count, as before custom resources existed. Custom resources come and
//! go with their CRDs: their entries live in an immutable [`CustomSet`] the CRD controller
//! replaces whole ([`ServedSet::replace_custom`]); a reader clones the current `Arc` under a
//! read lock held for that clone only, and keeps serving from its snapshot while the set
//! changes (a request already routed to a version that is being removed finishes).

use std::sync::{Arc, RwLock};

use crate::registry::resource::ResourceDef;

/// A served entry: a built-in's `static` one, or a custom resource's, kept alive by whoever
/// holds it (a watch outlives the removal of its CRD's entry until it ends).
#[derive(Clone)]
pub enum DefRef {
    /// A built-in entry.
    Static(&'static ResourceDef),
    /// A custom resource's entry.
    Shared(Arc<ResourceDef>),
}

impl std::ops::Deref for DefRef {
    type Target = ResourceDef;

    fn deref(&self) -> &ResourceDef {
        match self {
            DefRef::Static(def) => def,
            DefRef::Shared(def) => def,
        }
    }
}

impl std::fmt::Debug for DefRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

/// The custom resources' entries at one moment, immutable once built.
#[derive(Debug, Default)]
pub struct CustomSet {
    /// Every served version of every Established CRD, in the CRD controller's order (CRDs
    /// by name, versions as the CRD lists them); `(group, version, plural)` is unique and
    /// never a built-in's.
    pub defs: Vec<Arc<ResourceDef>>,
    /// Bumped on every replacement, so derived documents (OpenAPI) know they are stale.
    pub generation: u64,
}

/// A snapshot of everything served: iterate it for discovery and the OpenAPI documents.
#[derive(Clone, Debug)]
pub struct Resources {
    builtin: &'static [&'static ResourceDef],
    custom: Arc<CustomSet>,
}

impl Resources {
    /// Every entry, built-ins first, in discovery order.
    pub fn iter(&self) -> impl Iterator<Item = &ResourceDef> {
        self.builtin
            .iter()
            .copied()
            .chain(self.custom.defs.iter().map(|d| d.as_ref()))
    }

    /// Every entry as an owned handle.
    pub fn refs(&self) -> impl Iterator<Item = DefRef> + '_ {
        self.builtin.iter().map(|d| DefRef::Static(d)).chain(
            self.custom
                .defs
                .iter()
                .map(|d| DefRef::Shared(Arc::clone(d))),
        )
    }

    /// The built-in entries.
    pub fn builtin(&self) -> &'static [&'static ResourceDef] {
        self.builtin
    }

    /// The custom resources' entries.
    pub fn custom(&self) -> &CustomSet {
        &self.custom
    }
}

/// The served set: built-ins fixed at construction, custom entries replaced at run time.
#[derive(Debug)]
pub struct ServedSet {
    /// The built-in entries; `(group, version, plural)` is unique. A linear scan over a few
    /// dozen entries is as fast as hashing the three strings.
    builtin: &'static [&'static ResourceDef],
    /// The current custom set; the lock is held only to clone or swap the `Arc`.
    custom: RwLock<Arc<CustomSet>>,
}

impl ServedSet {
    /// Serves `builtin` and no custom resource.
    pub fn new(builtin: &'static [&'static ResourceDef]) -> Self {
        Self {
            builtin,
            custom: RwLock::new(Arc::new(CustomSet::default())),
        }
    }

    /// The current custom set.
    fn custom_now(&self) -> Arc<CustomSet> {
        Arc::clone(&self.custom.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// A snapshot of everything served now.
    pub fn snapshot(&self) -> Resources {
        Resources {
            builtin: self.builtin,
            custom: self.custom_now(),
        }
    }

    /// The built-in entries.
    pub fn builtin(&self) -> &'static [&'static ResourceDef] {
        self.builtin
    }

    /// The entry serving `group/version/plural`: a built-in without touching the lock, else
    /// a custom resource's.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<DefRef> {
        if let Some(def) = self
            .builtin
            .iter()
            .find(|d| d.group == group && d.version == version && d.plural == plural)
        {
            return Some(DefRef::Static(def));
        }
        let custom = self.custom_now();
        custom
            .defs
            .iter()
            .find(|d| d.group == group && d.version == version && d.plural == plural)
            .map(|d| DefRef::Shared(Arc::clone(d)))
    }

    /// Replaces the custom entries (dropping any that collide with a built-in, which the
    /// CRD controller never establishes) and returns the new generation.
    pub fn replace_custom(&self, defs: Vec<Arc<ResourceDef>>) -> u64 {
        let defs: Vec<Arc<ResourceDef>> =
            defs.into_iter()
                .filter(|d| {
                    !self.builtin.iter().any(|b| {
                        b.group == d.group && b.version == d.version && b.plural == d.plural
                    })
                })
                .collect();
        let mut slot = self.custom.write().unwrap_or_else(|e| e.into_inner());
        let generation = slot.generation + 1;
        *slot = Arc::new(CustomSet { defs, generation });
        generation
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::resource::fixtures;

    #[test]
    fn built_ins_are_found_without_custom_entries() {
        let set = ServedSet::new(fixtures::ALL);
        let found = set.lookup("", "v1", "componentstatuses").expect("served");
        assert!(matches!(found, DefRef::Static(_)));
        assert!(set.lookup("example.com", "v1", "foos").is_none());
        assert_eq!(set.snapshot().iter().count(), fixtures::ALL.len());
        assert_eq!(set.snapshot().custom().generation, 0);
    }
}
