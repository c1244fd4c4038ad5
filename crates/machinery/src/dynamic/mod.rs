//! Custom resources from a controller's side: a dynamic client over any group/version/resource (untyped [`DynamicObject`]s, resolved through discovery), and [`custom_resource!`](crate::custom_resource) for a typed Rust struct that gets typed informers and listers.
//!
//! Both kinds of informer come from the one [`SharedInformerFactory`]
//! (`informer_for::<Foo>()` typed, `dynamic(resource)` untyped), which hands out one informer
//! per resource and object type: every controller of a process asking for Foos as `Foo` shares
//! one watch and one cache (client-go keeps typed and dynamic factories apart the same way).
//!
//! [`DynamicObject`]: kube::core::DynamicObject
//! [`SharedInformerFactory`]: crate::informer::SharedInformerFactory

mod client;
mod custom_resource;

pub use client::{DynamicClient, Error, ServedResource};
