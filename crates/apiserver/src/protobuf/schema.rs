//! The shape of the generated wire tables (`schema_gen.rs`): messages, fields, JSON kinds.

/// How a field's wire value becomes JSON.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Kind {
    /// `string` → JSON string.
    String,
    /// `bool` → JSON bool.
    Bool,
    /// `int32` → JSON number.
    Int32,
    /// `int64` → JSON number.
    Int64,
    /// `double` → JSON number, integral values without a fraction as Go writes them.
    Double,
    /// `bytes` → base64 JSON string, as Go's `[]byte`.
    Bytes,
    /// A nested message (index into `MESSAGES`) → JSON object.
    Message(u16),
    /// `meta.v1.Time` → RFC 3339 with seconds (an empty message is the zero time: omitted).
    Time,
    /// `meta.v1.MicroTime` → RFC 3339 with microseconds.
    MicroTime,
    /// `intstr.IntOrString` → JSON number or string.
    IntOrString,
    /// `resource.Quantity` → its string form.
    Quantity,
    /// `runtime.RawExtension` / `meta.v1.FieldsV1` → the embedded JSON document.
    RawJson,
    /// apiextensions' `JSON` (a schema's `default`, `enum`, `example`) → the embedded JSON
    /// document, `null` when empty (its `MarshalJSON`).
    Json,
    /// A message (index into `MESSAGES`) whose JSON is one of its fields, not an object.
    Wrapped(u16, Wrapper),
    /// `map<string, V>` → JSON object.
    Map(&'static Kind),
}

/// How a [`Kind::Wrapped`] message becomes JSON: Go types with a `MarshalJSON` of their own
/// (apiextensions' `marshal.go`), or a named `[]string` that protobuf carries in a message.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Wrapper {
    /// `ExtraValue` (`[]string`): the array of field 1 (`items`).
    List,
    /// `JSONSchemaPropsOrArray`: the array of field 2 (`jSONSchemas`) when not empty, else
    /// the schema of field 1 (`null` when absent).
    PropsOrArray,
    /// `JSONSchemaPropsOrBool`: the schema of field 2 when present, else the bool of field
    /// 1 (`allows`).
    PropsOrBool,
    /// `JSONSchemaPropsOrStringArray`: the array of field 2 (`property`) when not empty,
    /// else the schema of field 1, else `null`.
    PropsOrStringArray,
}

/// One field of a message.
#[derive(Clone, Copy, Debug)]
pub(super) struct Field {
    /// The protobuf field number.
    pub tag: u32,
    /// The JSON name; empty for a Go-embedded (`,inline`) message whose fields are the
    /// parent's.
    pub json: &'static str,
    /// How the value decodes.
    pub kind: Kind,
    /// `repeated`: values accumulate into a JSON array.
    pub repeated: bool,
    /// A Go pointer field: a zero value was set on purpose and is kept. Zero values of
    /// other scalar fields are dropped, as Go's `omitempty` JSON would drop them.
    pub keep_zero: bool,
}

/// One message type.
#[derive(Debug)]
pub(super) struct Message {
    /// The full protobuf name (`k8s.io.api.core.v1.Pod`).
    pub name: &'static str,
    /// Its fields, by ascending tag.
    pub fields: &'static [Field],
}

impl Message {
    /// The field with `tag`, if the schema knows it.
    pub(super) fn field(&self, tag: u32) -> Option<&'static Field> {
        self.fields
            .binary_search_by_key(&tag, |f| f.tag)
            .ok()
            .map(|i| &self.fields[i])
    }
}
