//! The Kubernetes version the server reports (`/version`, the OpenAPI documents' `info.version`).

use serde_json::{Value, json};

/// The `gitVersion` the server reports: the v1.36 API it serves (the k8s-openapi `v1_36`
/// types), with kcm's version as semver build metadata, as k3s' `v1.36.1+k3s1` — a
/// pre-release suffix would fail Helm's `kubeVersion: ">=1.36.0"` constraints.
pub const GIT_VERSION: &str = concat!("v1.36.0+kcm-", env!("CARGO_PKG_VERSION"));

/// The minor version of the Kubernetes API served (`1.36`): what version-dependent behaviour
/// (PodSecurity's `latest` checks) follows.
pub const MINOR: u32 = 36;

/// `/version`, as a v1.36 kube-apiserver answers it: the binary version, the emulated version
/// (the same: kcm emulates no older release) and the oldest version it stays compatible with
/// (one minor back, upstream's default `--min-compatibility-version`).
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": MINOR.to_string(),
        "emulationMajor": "1",
        "emulationMinor": MINOR.to_string(),
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": (MINOR - 1).to_string(),
        "gitVersion": GIT_VERSION,
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "rust",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch(std::env::consts::ARCH)),
    })
}

/// Rust's architecture name as Go's `GOARCH` spells it (`x86_64` is `amd64`).
fn go_arch(arch: &str) -> &str {
    match arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_the_v1_36_minor() {
        let v = version();
        assert_eq!(
            (v["major"].as_str(), v["minor"].as_str()),
            (Some("1"), Some("36"))
        );
        assert_eq!(
            (
                v["emulationMinor"].as_str(),
                v["minCompatibilityMinor"].as_str()
            ),
            (Some("36"), Some("35"))
        );
        assert!(GIT_VERSION.starts_with("v1.36.0+kcm-"), "{GIT_VERSION}");
        assert_eq!(go_arch("x86_64"), "amd64");
        assert_eq!(go_arch("aarch64"), "arm64");
    }
}
