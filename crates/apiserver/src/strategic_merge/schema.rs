//! The patch metadata a strategic merge needs: per field, its strategy and list merge key.
//!
//! Upstream reads this from the Go struct tags `patchStrategy` and `patchMergeKey` by
//! reflection (`LookupPatchMetadataForStruct`/`ForSlice`). Here a type is a static
//! [`TypeDef`] that lists only the fields that matter: fields with a strategy, and fields
//! leading to them. Every other field is [`TypeDef::OPAQUE`]: maps merge key by key, lists
//! are replaced — the default for an untagged field upstream as well.

use std::fmt;

/// How the value of one field is combined with the live value (the `patchStrategy` tag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// No tag: maps merge key by key, lists are replaced whole.
    Default,
    /// `patchStrategy:"merge"`: lists of maps merge element by element on the merge key,
    /// lists of scalars merge as a set.
    Merge,
    /// `patchStrategy:"replace"`: the patch value replaces the live value, maps included.
    Replace,
}

/// One field of a [`TypeDef`] and its patch metadata.
#[derive(Clone, Copy)]
pub struct FieldDef {
    /// The JSON name of the field.
    pub name: &'static str,
    /// The patch strategy.
    pub strategy: Strategy,
    /// Whether the tag also says `retainKeys`. Applying a patch does not need it (the
    /// `$retainKeys` directive in the patch is what clears fields); it is kept so the table
    /// mirrors the Go tags.
    pub retain_keys: bool,
    /// The `patchMergeKey` of a list of maps; empty when the field has none.
    pub merge_key: &'static str,
    /// The type of the value: for a list, the type of its elements.
    pub ty: &'static TypeDef,
}

/// The patch-relevant shape of one object type.
pub struct TypeDef {
    /// A name for messages (the Go type name).
    pub name: &'static str,
    /// The fields with patch metadata, or leading to fields that have some.
    pub fields: &'static [FieldDef],
    /// For a `map[string]T`: the type of every value. `None` for structs.
    pub values: Option<&'static TypeDef>,
}

impl TypeDef {
    /// A value with no known fields: maps merge key by key and every list is replaced.
    pub const OPAQUE: TypeDef = TypeDef {
        name: "unknown",
        fields: &[],
        values: None,
    };

    /// The metadata of field `name`; an unlisted field gets the default strategy and an
    /// opaque type (upstream would fail the lookup of a field its struct does not have; we
    /// accept it, as the typed decode after the merge drops unknown fields anyway).
    pub fn field(&self, name: &str) -> FieldMeta {
        if let Some(f) = self.fields.iter().find(|f| f.name == name) {
            return FieldMeta {
                strategy: f.strategy,
                merge_key: f.merge_key,
                ty: f.ty,
            };
        }
        FieldMeta {
            strategy: Strategy::Default,
            merge_key: "",
            ty: self.values.unwrap_or(&OPAQUE),
        }
    }
}

static OPAQUE: TypeDef = TypeDef::OPAQUE;

impl fmt::Debug for TypeDef {
    // Types are recursive (a container's fields lead back to containers in tests), so only
    // the name and the field names are printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypeDef")
            .field("name", &self.name)
            .field(
                "fields",
                &self.fields.iter().map(|f| f.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl fmt::Debug for FieldDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FieldDef")
            .field("name", &self.name)
            .field("strategy", &self.strategy)
            .field("retain_keys", &self.retain_keys)
            .field("merge_key", &self.merge_key)
            .field("ty", &self.ty.name)
            .finish()
    }
}

/// The result of looking a field up: what `LookupPatchMetadata` returns upstream.
#[derive(Clone, Copy, Debug)]
pub struct FieldMeta {
    /// The patch strategy (`retainKeys` stripped, as `extractRetainKeysPatchStrategy` does).
    pub strategy: Strategy,
    /// The list merge key, empty if none.
    pub merge_key: &'static str,
    /// The type of the value, or of the list's elements.
    pub ty: &'static TypeDef,
}

/// The patch metadata of one kind: the root [`TypeDef`] of its objects. Cheap to copy.
#[derive(Clone, Copy, Debug)]
pub struct Schema {
    /// The type of the whole object.
    pub(super) root: &'static TypeDef,
}

impl Schema {
    /// A schema rooted at `root`.
    pub const fn new(root: &'static TypeDef) -> Self {
        Self { root }
    }

    /// The schema for a kind nothing is known about: every list is replaced, maps merge —
    /// JSON merge patch semantics plus the `$patch`/`$retainKeys`/... directives.
    pub const fn unknown() -> Self {
        Self { root: &OPAQUE }
    }

    /// The root type.
    pub fn root(&self) -> &'static TypeDef {
        self.root
    }
}

/// Shorthand for the static tables: a field with the default strategy.
pub(super) const fn field(name: &'static str, ty: &'static TypeDef) -> FieldDef {
    FieldDef {
        name,
        strategy: Strategy::Default,
        retain_keys: false,
        merge_key: "",
        ty,
    }
}

/// Shorthand: a list merged on `merge_key` (empty for a set of scalars).
pub(super) const fn merge_list(
    name: &'static str,
    merge_key: &'static str,
    ty: &'static TypeDef,
) -> FieldDef {
    FieldDef {
        name,
        strategy: Strategy::Merge,
        retain_keys: false,
        merge_key,
        ty,
    }
}

/// Shorthand: a list merged on `merge_key` whose elements also carry `retainKeys`.
pub(super) const fn merge_list_retain_keys(
    name: &'static str,
    merge_key: &'static str,
    ty: &'static TypeDef,
) -> FieldDef {
    FieldDef {
        name,
        strategy: Strategy::Merge,
        retain_keys: true,
        merge_key,
        ty,
    }
}

/// Shorthand: a field whose patch value replaces the live value.
pub(super) const fn replace(name: &'static str, ty: &'static TypeDef) -> FieldDef {
    FieldDef {
        name,
        strategy: Strategy::Replace,
        retain_keys: false,
        merge_key: "",
        ty,
    }
}

/// Shorthand: a map field tagged `retainKeys` only.
pub(super) const fn retain_keys(name: &'static str, ty: &'static TypeDef) -> FieldDef {
    FieldDef {
        name,
        strategy: Strategy::Default,
        retain_keys: true,
        merge_key: "",
        ty,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static LEAF: TypeDef = TypeDef {
        name: "Leaf",
        fields: &[merge_list("items", "name", &TypeDef::OPAQUE)],
        values: None,
    };
    static MAP_OF_LEAVES: TypeDef = TypeDef {
        name: "map[string]Leaf",
        fields: &[],
        values: Some(&LEAF),
    };

    #[test]
    fn listed_field_carries_its_metadata() {
        let meta = LEAF.field("items");
        assert_eq!(meta.strategy, Strategy::Merge);
        assert_eq!(meta.merge_key, "name");
    }

    #[test]
    fn unlisted_field_is_opaque_with_default_strategy() {
        let meta = LEAF.field("other");
        assert_eq!(meta.strategy, Strategy::Default);
        assert_eq!(meta.merge_key, "");
        assert_eq!(meta.ty.name, "unknown");
    }

    #[test]
    fn map_values_share_one_type() {
        let meta = MAP_OF_LEAVES.field("any-key");
        assert_eq!(meta.ty.name, "Leaf");
        assert_eq!(meta.ty.field("items").merge_key, "name");
    }
}
