//! The trait impls builders repeat, written once: `From<builder>`, [`crate::MetaBuilder`], [`crate::WorkloadBuilder`].

/// `impl From<$builder> for $built` by `build()`, so a builder goes wherever its object does.
macro_rules! from_builder {
    ($($builder:ty => $built:ty),* $(,)?) => {$(
        impl From<$builder> for $built {
            fn from(b: $builder) -> Self {
                b.build()
            }
        }
    )*};
}

/// `impl MetaBuilder for $builder`, whose object (with a plain `metadata` field) is in
/// `self.$object`.
macro_rules! meta_builder {
    ($($builder:ty => $object:ident),* $(,)?) => {$(
        impl $crate::meta::MetaBuilder for $builder {
            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.$object.metadata
            }
        }
    )*};
}

/// The [`crate::WorkloadBuilder`] accessors ReplicaSet and Deployment specs name alike, for a
/// builder with `spec_mut()` and a `stamped_labels` field.
macro_rules! workload_spec_accessors {
    () => {
        fn replicas_mut(&mut self) -> &mut Option<i32> {
            &mut self.spec_mut().replicas
        }

        fn min_ready_seconds_mut(&mut self) -> &mut Option<i32> {
            &mut self.spec_mut().min_ready_seconds
        }

        fn selector_mut(
            &mut self,
        ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            &mut self.spec_mut().selector
        }

        fn stamped_labels_mut(&mut self) -> &mut std::collections::BTreeMap<String, String> {
            &mut self.stamped_labels
        }
    };
}
