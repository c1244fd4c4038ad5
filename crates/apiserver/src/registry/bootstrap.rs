//! The objects every cluster starts with (upstream's post-start hooks, e.g. the system priority classes): created at start when missing, never overwritten.

use crate::error::Result;
use crate::object;
use crate::registry::Registry;

impl Registry {
    /// Creates every entry's [bootstrap objects](crate::registry::ResourceDef::bootstrap_objects)
    /// that do not exist yet. An existing object is left as it is (a restart keeps the
    /// stored state, as upstream's hooks only create what is missing).
    pub async fn ensure_bootstrap_objects(&self) -> Result<()> {
        for def in self.resources() {
            for obj in (def.bootstrap_objects)() {
                let namespace = object::namespace(&obj).to_owned();
                if self
                    .get_kv(def, &namespace, object::name(&obj))
                    .await?
                    .is_some()
                {
                    continue;
                }
                match self.create_checked(def, obj, false).await {
                    Ok(_) => {}
                    // Another server sharing the store created it meanwhile.
                    Err(e) if e.code == 409 => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}
