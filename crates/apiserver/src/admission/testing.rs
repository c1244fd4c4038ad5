//! Test support: an in-memory [`ObjectSource`] holding the objects a plugin test needs.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::admission::source::ObjectSource;
use crate::error::Result;
use crate::object;
use crate::registry::DefRef;
use crate::registry::resource::ResourceDef;

/// Objects by resource (group and plural), served as the registry would.
#[derive(Debug, Default)]
pub struct Objects {
    /// `(group, plural, object)`.
    objects: Vec<(String, String, Value)>,
    /// The resources of the objects, for [`ObjectSource::resource_for_kind`].
    defs: Vec<&'static ResourceDef>,
}

impl Objects {
    /// A source holding `objects`.
    pub fn new(objects: Vec<(&'static ResourceDef, Value)>) -> Self {
        let mut defs: Vec<&'static ResourceDef> = Vec::new();
        for (def, _) in &objects {
            if !defs.iter().any(|d| std::ptr::eq(*d, *def)) {
                defs.push(def);
            }
        }
        Self {
            defs,
            objects: objects
                .into_iter()
                .map(|(def, obj)| (def.group.to_string(), def.plural.to_string(), obj))
                .collect(),
        }
    }

    fn of<'a>(&'a self, def: &'a ResourceDef) -> impl Iterator<Item = &'a Value> + 'a {
        self.objects
            .iter()
            .filter(move |(g, p, _)| *g == def.group && *p == def.plural)
            .map(|(_, _, o)| o)
    }
}

#[async_trait]
impl ObjectSource for Objects {
    async fn get(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<Value>>> {
        Ok(self
            .of(def)
            .find(|o| object::name(o) == name && object::namespace(o) == namespace)
            .map(|o| Arc::new(o.clone())))
    }

    async fn list(&self, def: &ResourceDef, namespace: &str) -> Result<Vec<Arc<Value>>> {
        Ok(self
            .of(def)
            .filter(|o| namespace.is_empty() || object::namespace(o) == namespace)
            .map(|o| Arc::new(o.clone()))
            .collect())
    }

    fn serves(&self, _: &ResourceDef) -> bool {
        true
    }

    fn resource_for_kind(&self, api_version: &str, kind: &str) -> Option<DefRef> {
        self.defs
            .iter()
            .find(|d| d.api_version() == api_version && d.kind == kind)
            .map(|d| DefRef::Static(d))
    }
}
