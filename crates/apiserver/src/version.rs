//! The Kubernetes version the server reports (`/version`, the OpenAPI documents' `info.version`).

use serde_json::{Value, json};

/// The `gitVersion` the server reports: a v1.32 API (kubectl warns about larger skews).
pub const GIT_VERSION: &str = concat!("v1.32.0+kcm-", env!("CARGO_PKG_VERSION"));

/// `/version`: a v1.32-style version.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": GIT_VERSION,
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "rust",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}
