//! Why a protobuf request body could not be decoded.

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A protobuf body kcm cannot turn into JSON. All are the client's fault (400), except
/// [`Error::UnsupportedKind`], which the server answers with 415 so clients can retry
/// with JSON.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The body does not start with the `k8s\0` magic.
    #[error("protobuf body does not start with the k8s\\0 magic prefix")]
    MissingMagic,
    /// The `runtime.Unknown` envelope did not decode.
    #[error("protobuf envelope: {0}")]
    Envelope(String),
    /// The envelope has no `typeMeta`, so the object's kind is unknown.
    #[error("protobuf envelope has no typeMeta")]
    MissingTypeMeta,
    /// The envelope's `contentEncoding` is set (upstream writes none).
    #[error("protobuf envelope content encoding {0:?} is not supported")]
    UnsupportedEncoding(String),
    /// No decoder for this apiVersion and kind.
    #[error("protobuf decoding of {api_version} {kind} is not supported")]
    UnsupportedKind {
        /// The envelope's `typeMeta.apiVersion`.
        api_version: String,
        /// The envelope's `typeMeta.kind`.
        kind: String,
    },
    /// The object's bytes are not valid protobuf for its type.
    #[error("malformed protobuf: {0}")]
    Malformed(&'static str),
    /// The object nests deeper than kcm reads (recursive messages: a CRD's schema).
    #[error("malformed protobuf: the object nests more than {0} levels deep")]
    TooDeep(usize),
    /// A field holds a value of the wrong wire type.
    #[error("malformed protobuf: field {field} of {message} has wire type {wire_type}")]
    WrongWireType {
        /// The message type.
        message: &'static str,
        /// The field's JSON name.
        field: &'static str,
        /// The wire type found.
        wire_type: u8,
    },
    /// A string field is not UTF-8.
    #[error("malformed protobuf: field {field} of {message} is not UTF-8")]
    NotUtf8 {
        /// The message type.
        message: &'static str,
        /// The field's JSON name.
        field: &'static str,
    },
    /// An embedded JSON document (`RawExtension`, `FieldsV1`) is not JSON.
    #[error("malformed protobuf: field {field} of {message} does not hold JSON: {reason}")]
    BadEmbeddedJson {
        /// The message type.
        message: &'static str,
        /// The field's JSON name.
        field: &'static str,
        /// The JSON parser's complaint.
        reason: String,
    },
}

impl Error {
    /// The HTTP status the API server answers with.
    pub fn status_code(&self) -> u16 {
        match self {
            Error::UnsupportedKind { .. } => 415,
            _ => 400,
        }
    }
}
