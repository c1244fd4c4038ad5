//! Compiled policies and decoded bindings by name, rebuilt only when an object's resourceVersion changes, so no request compiles an expression that an earlier one compiled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::object;

/// What the cache keeps per name: the built value and the resourceVersion it was built from.
#[derive(Debug)]
pub struct Cache<T> {
    /// By object name; every entry's version is the resourceVersion its value was built from.
    /// The lock is held to look up or swap entries only, never while building or awaiting.
    entries: Mutex<HashMap<String, (String, Arc<T>)>>,
}

impl<T> Default for Cache<T> {
    fn default() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> Cache<T> {
    /// The values for `objects` (in their order), building those new or changed with `build`
    /// and forgetting the names no longer present. Objects `build` refuses are skipped.
    pub fn sync(
        &self,
        objects: &[Arc<Value>],
        mut build: impl FnMut(&Value) -> Option<T>,
    ) -> Vec<Arc<T>> {
        let mut out = Vec::with_capacity(objects.len());
        let mut missing = Vec::new();
        {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            for (i, obj) in objects.iter().enumerate() {
                match entries.get(object::name(obj)) {
                    Some((rv, value)) if rv == object::resource_version(obj) => {
                        out.push((i, Arc::clone(value)));
                    }
                    _ => missing.push(i),
                }
            }
        }
        // Build outside the lock: compiling is the slow part.
        let built: Vec<(usize, Arc<T>)> = missing
            .into_iter()
            .filter_map(|i| build(&objects[i]).map(|v| (i, Arc::new(v))))
            .collect();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        for (i, value) in &built {
            let obj = &objects[*i];
            entries.insert(
                object::name(obj).to_owned(),
                (object::resource_version(obj).to_owned(), Arc::clone(value)),
            );
        }
        if entries.len() > objects.len() {
            entries.retain(|name, _| objects.iter().any(|o| object::name(o) == name));
        }
        drop(entries);
        out.extend(built);
        out.sort_by_key(|(i, _)| *i);
        out.into_iter().map(|(_, v)| v).collect()
    }

    /// How many values are cached.
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(name: &str, rv: &str) -> Arc<Value> {
        Arc::new(json!({"metadata": {"name": name, "resourceVersion": rv}}))
    }

    #[test]
    fn values_are_built_once_per_resource_version_and_forgotten_when_gone() {
        let cache: Cache<String> = Cache::default();
        let mut builds = 0;
        let mut build = |o: &Value| {
            builds += 1;
            Some(format!(
                "{}@{}",
                object::name(o),
                object::resource_version(o)
            ))
        };
        let first = cache.sync(&[obj("a", "1"), obj("b", "1")], &mut build);
        let again = cache.sync(&[obj("a", "1"), obj("b", "1")], &mut build);
        assert!(Arc::ptr_eq(&first[0], &again[0]));
        let changed = cache.sync(&[obj("b", "2"), obj("a", "1")], &mut build);
        assert_eq!(*changed[0], "b@2");
        assert!(Arc::ptr_eq(&changed[1], &first[0]));
        cache.sync(&[obj("b", "2")], &mut build);
        assert_eq!(cache.len(), 1);
        assert_eq!(builds, 3);
    }
}
