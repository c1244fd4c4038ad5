//! Object metadata: the [`MetaBuilder`] setters every object builder shares, and [`meta`].

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

/// A label (or annotation) map from `(key, value)` pairs.
pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A resource list (`{"cpu": "100m", ...}`) from `(resource, quantity)` pairs.
pub fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
        .collect()
}

/// Fluent setters of `metadata`, shared by every object builder (and by [`ObjectMetaBuilder`]
/// for tests that only need metadata). Map and list setters add to what is there.
pub trait MetaBuilder: Sized {
    /// The metadata being built (created empty where the object holds it in an `Option`).
    fn meta_mut(&mut self) -> &mut ObjectMeta;

    /// Sets `metadata.name`.
    fn name(mut self, name: impl Into<String>) -> Self {
        self.meta_mut().name = Some(name.into());
        self
    }

    /// Sets `metadata.generateName`.
    fn generate_name(mut self, prefix: impl Into<String>) -> Self {
        self.meta_mut().generate_name = Some(prefix.into());
        self
    }

    /// Sets `metadata.namespace`.
    fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.meta_mut().namespace = Some(namespace.into());
        self
    }

    /// Sets `metadata.uid`.
    fn uid(mut self, uid: impl Into<String>) -> Self {
        self.meta_mut().uid = Some(uid.into());
        self
    }

    /// Sets `metadata.resourceVersion`.
    fn resource_version(mut self, rv: impl Into<String>) -> Self {
        self.meta_mut().resource_version = Some(rv.into());
        self
    }

    /// Sets `metadata.generation`.
    fn generation(mut self, generation: i64) -> Self {
        self.meta_mut().generation = Some(generation);
        self
    }

    /// Adds one label.
    fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.meta_mut()
            .labels
            .get_or_insert_default()
            .insert(key.into(), value.into());
        self
    }

    /// Adds labels; with no pairs, still leaves an (empty) label map.
    fn labels(mut self, pairs: &[(&str, &str)]) -> Self {
        self.meta_mut()
            .labels
            .get_or_insert_default()
            .extend(labels(pairs));
        self
    }

    /// Adds one annotation.
    fn annotation(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.meta_mut()
            .annotations
            .get_or_insert_default()
            .insert(key.into(), value.into());
        self
    }

    /// Adds annotations; with no pairs, still leaves an (empty) annotation map.
    fn annotations(mut self, pairs: &[(&str, &str)]) -> Self {
        self.meta_mut()
            .annotations
            .get_or_insert_default()
            .extend(labels(pairs));
        self
    }

    /// Appends an owner reference.
    fn owner(mut self, owner: impl Into<OwnerReference>) -> Self {
        self.meta_mut()
            .owner_references
            .get_or_insert_default()
            .push(owner.into());
        self
    }

    /// Appends finalizers; with none, still leaves an (empty) finalizer list.
    fn finalizers(mut self, finalizers: &[&str]) -> Self {
        self.meta_mut()
            .finalizers
            .get_or_insert_default()
            .extend(finalizers.iter().map(|f| (*f).to_owned()));
        self
    }

    /// Sets `metadata.creationTimestamp`.
    fn created_at(mut self, at: Timestamp) -> Self {
        self.meta_mut().creation_timestamp = Some(Time(at));
        self
    }

    /// Sets `metadata.deletionTimestamp`: the object is being deleted.
    fn deleted_at(mut self, at: Timestamp) -> Self {
        self.meta_mut().deletion_timestamp = Some(Time(at));
        self
    }

    /// Sets `metadata.deletionGracePeriodSeconds`.
    fn deletion_grace_period(mut self, seconds: i64) -> Self {
        self.meta_mut().deletion_grace_period_seconds = Some(seconds);
        self
    }
}

/// Builds an [`ObjectMeta`] on its own (for code that works on metadata, such as the garbage
/// collector's graph). Start with [`meta`].
#[derive(Clone, Debug, Default)]
pub struct ObjectMetaBuilder {
    meta: ObjectMeta,
}

/// Metadata named `name`, nothing else set.
pub fn meta(name: &str) -> ObjectMetaBuilder {
    ObjectMetaBuilder::default().name(name)
}

impl ObjectMetaBuilder {
    /// The metadata.
    pub fn build(self) -> ObjectMeta {
        self.meta
    }
}

impl MetaBuilder for ObjectMetaBuilder {
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

from_builder!(ObjectMetaBuilder => ObjectMeta);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_sets_only_the_name() {
        assert_eq!(
            meta("m").build(),
            ObjectMeta {
                name: Some("m".into()),
                ..ObjectMeta::default()
            }
        );
    }

    #[test]
    fn setters_fill_their_fields_and_maps_accumulate() {
        let at = Timestamp::from_second(1_700_000_000).expect("timestamp");
        let m = meta("m")
            .namespace("ns")
            .uid("u")
            .resource_version("7")
            .generation(2)
            .label("a", "1")
            .labels(&[("b", "2")])
            .annotation("x", "y")
            .finalizers(&["f1"])
            .finalizers(&["f2"])
            .created_at(at)
            .deleted_at(at)
            .deletion_grace_period(30)
            .build();
        assert_eq!(m.namespace.as_deref(), Some("ns"));
        assert_eq!(m.uid.as_deref(), Some("u"));
        assert_eq!(m.resource_version.as_deref(), Some("7"));
        assert_eq!(m.generation, Some(2));
        assert_eq!(m.labels, Some(labels(&[("a", "1"), ("b", "2")])));
        assert_eq!(m.annotations, Some(labels(&[("x", "y")])));
        assert_eq!(m.finalizers, Some(vec!["f1".to_owned(), "f2".to_owned()]));
        assert_eq!(m.creation_timestamp, Some(Time(at)));
        assert_eq!(m.deletion_timestamp, Some(Time(at)));
        assert_eq!(m.deletion_grace_period_seconds, Some(30));
    }

    #[test]
    fn empty_pairs_still_create_the_maps() {
        let m = meta("m")
            .labels(&[])
            .annotations(&[])
            .finalizers(&[])
            .build();
        assert_eq!(m.labels, Some(BTreeMap::new()));
        assert_eq!(m.annotations, Some(BTreeMap::new()));
        assert_eq!(m.finalizers, Some(vec![]));
    }

    #[test]
    fn quantities_wraps_each_value() {
        let q = quantities(&[("cpu", "100m")]);
        assert_eq!(q.get("cpu"), Some(&Quantity("100m".into())));
    }
}
