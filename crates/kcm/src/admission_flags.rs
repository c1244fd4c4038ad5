//! kube-apiserver's admission flags, shared by `kcm apiserver` and `kcm up`.

use clap::Args;
use kcm_apiserver::admission::AdmissionConfig;

/// `--enable-admission-plugins` and `--disable-admission-plugins`, with upstream's names and
/// comma-separated values (repeating a flag adds to it).
#[derive(Clone, Debug, Default, Args)]
pub struct AdmissionFlags {
    /// Admission plugins to enable beyond the default ones (NamespaceLifecycle, LimitRanger,
    /// ServiceAccount, TaintNodesByCondition, PodSecurity, Priority, DefaultTolerationSeconds,
    /// DefaultStorageClass, StorageObjectInUseProtection, RuntimeClass). Order does not matter:
    /// plugins always run in upstream's order.
    #[arg(long, value_name = "plugins", value_delimiter = ',')]
    pub enable_admission_plugins: Vec<String>,
    /// Admission plugins to disable, default ones included.
    #[arg(long, value_name = "plugins", value_delimiter = ',')]
    pub disable_admission_plugins: Vec<String>,
}

impl AdmissionFlags {
    /// The configuration the flags ask for.
    pub fn config(&self) -> AdmissionConfig {
        AdmissionConfig::from_flags(
            &self.enable_admission_plugins,
            &self.disable_admission_plugins,
        )
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        flags: AdmissionFlags,
    }

    #[test]
    fn flags_take_comma_separated_upstream_names() {
        let cli = Cli::parse_from([
            "kcm",
            "--enable-admission-plugins",
            "StorageObjectInUseProtection",
            "--disable-admission-plugins=PodSecurity,ServiceAccount",
        ]);
        let config = cli.flags.config();
        assert_eq!(config.enable, ["StorageObjectInUseProtection"]);
        assert_eq!(config.disable, ["PodSecurity", "ServiceAccount"]);
        let names = config.enabled_names();
        assert!(names.contains(&"StorageObjectInUseProtection"));
        assert!(!names.contains(&"PodSecurity"));
        assert_eq!(
            Cli::parse_from(["kcm"]).flags.config(),
            AdmissionConfig::default()
        );
    }
}
