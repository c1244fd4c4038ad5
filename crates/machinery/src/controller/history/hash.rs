//! ControllerRevision names and hashes, as upstream's `HashControllerRevision` and `ControllerRevisionName`.
//!
//! A DaemonSet or StatefulSet records each version of its pod template as a ControllerRevision
//! named `<owner>-<hash>` and labelled [`CONTROLLER_REVISION_HASH_LABEL`]`=<hash>`, where the
//! hash is [`hash_controller_revision`]: FNV-32 (FNV-1, Go's `fnv.New32`, not the FNV-1a of
//! the pod-template hash) over the revision's raw `data` bytes, then, when a collision count is
//! given, its decimal digits, the sum printed in decimal and safe-encoded. On a name collision
//! with a revision holding other data the controller bumps its `status.collisionCount` and
//! tries the next name.

use k8s_openapi::api::apps::v1::ControllerRevision;

use super::go_json::marshal;
use crate::controller::hash::{Fnv32, safe_encode_string};

/// The label holding a ControllerRevision's hash, as upstream's `ControllerRevisionHashLabel`.
pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// The longest owner-name prefix of a revision name: 253 bytes minus the hash and the dash.
const MAX_PREFIX_LEN: usize = 223;

/// `<prefix>-<hash>`, the prefix cut to 223 bytes so the name fits 253, as upstream's
/// `ControllerRevisionName`. (Object names are ASCII; a cut never splits a character.)
pub fn controller_revision_name(prefix: &str, hash: &str) -> String {
    let mut cut = prefix.len().min(MAX_PREFIX_LEN);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{hash}", &prefix[..cut])
}

/// The hash of `revision`'s data and the collision count `probe`, as upstream's
/// `HashControllerRevision`.
///
/// Upstream hashes `Data.Raw`, the bytes the controller marshalled. Here `data` is a parsed
/// value, so its bytes are re-encoded as Go's `json.Marshal` writes them
/// ([`super::go_json::marshal`]: compact, keys sorted, HTML characters escaped), which
/// reproduces the bytes of any revision Go or this crate wrote. To hash bytes exactly as
/// received, use [`hash_controller_revision_raw`].
pub fn hash_controller_revision(revision: &ControllerRevision, probe: Option<i32>) -> String {
    let raw = revision
        .data
        .as_ref()
        .map(|data| marshal(&data.0))
        .unwrap_or_default();
    hash_controller_revision_raw(&raw, probe)
}

/// [`hash_controller_revision`] over the raw `data` bytes: FNV-32 of `raw`, then of the
/// decimal digits of `probe` (`strconv.FormatInt`), printed in decimal and safe-encoded.
pub fn hash_controller_revision_raw(raw: &[u8], probe: Option<i32>) -> String {
    let mut hasher = Fnv32::new();
    hasher.update(raw);
    if let Some(probe) = probe {
        hasher.update(probe.to_string().as_bytes());
    }
    safe_encode_string(&hasher.sum32().to_string())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
    use serde_json::json;

    use super::*;

    const DATA: &[u8] = br#"{"spec":{"template":{"metadata":{"labels":{"foo":"bar"}}}}}"#;

    /// Expected values from an independent FNV-1 + `SafeEncodeString` implementation; the
    /// empty case is the FNV offset basis (2166136261).
    #[test]
    fn hash_matches_reference_values() {
        struct Case {
            name: &'static str,
            raw: &'static [u8],
            probe: Option<i32>,
            want: &'static str,
        }
        let cases = [
            Case {
                name: "no data, no probe",
                raw: b"",
                probe: None,
                want: "65bb57b6b5",
            },
            Case {
                name: "template patch",
                raw: DATA,
                probe: None,
                want: "86669dc9cf",
            },
            Case {
                name: "collision count 0 is hashed (as the digit 0)",
                raw: DATA,
                probe: Some(0),
                want: "84774d88fc",
            },
            Case {
                name: "collision count 1",
                raw: DATA,
                probe: Some(1),
                want: "84774d88fb",
            },
            Case {
                name: "negative counts print their sign",
                raw: DATA,
                probe: Some(-1),
                want: "75548d4cdf",
            },
        ];
        for c in cases {
            assert_eq!(
                hash_controller_revision_raw(c.raw, c.probe),
                c.want,
                "{}",
                c.name
            );
        }
    }

    /// Upstream's `TestRealHistory_CreateControllerRevision` "create renames on conflict":
    /// after a collision the revision is renamed with the hash of the bumped count.
    #[test]
    fn a_collision_count_renames_the_revision() {
        let names: Vec<String> = [None, Some(0), Some(1), Some(2)]
            .into_iter()
            .map(|probe| {
                controller_revision_name("ss1", &hash_controller_revision_raw(DATA, probe))
            })
            .collect();
        for (i, a) in names.iter().enumerate() {
            assert!(a.starts_with("ss1-"), "{a}");
            for b in &names[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(
            names[2],
            controller_revision_name("ss1", &hash_controller_revision_raw(DATA, Some(1))),
            "stable"
        );
    }

    #[test]
    fn the_hash_of_a_revision_is_the_hash_of_its_data_bytes() {
        let data = json!({"spec": {"template": {"metadata": {"labels": {"foo": "bar"}}}}});
        let revision = ControllerRevision {
            data: Some(RawExtension(data)),
            revision: 1,
            ..ControllerRevision::default()
        };
        assert_eq!(hash_controller_revision(&revision, None), "86669dc9cf");
        assert_eq!(hash_controller_revision(&revision, Some(1)), "84774d88fb");
        assert_eq!(
            hash_controller_revision(&ControllerRevision::default(), None),
            hash_controller_revision_raw(b"", None),
            "no data hashes like empty data"
        );
    }

    #[test]
    fn controller_revision_name_cuts_the_prefix_to_223_bytes() {
        struct Case {
            name: &'static str,
            prefix: String,
            want_prefix: String,
        }
        let cases = [
            Case {
                name: "short",
                prefix: "ds".into(),
                want_prefix: "ds".into(),
            },
            Case {
                name: "exactly 223",
                prefix: "a".repeat(223),
                want_prefix: "a".repeat(223),
            },
            Case {
                name: "longer is cut",
                prefix: "b".repeat(300),
                want_prefix: "b".repeat(223),
            },
        ];
        for c in cases {
            assert_eq!(
                controller_revision_name(&c.prefix, "5d4b8f6c7"),
                format!("{}-5d4b8f6c7", c.want_prefix),
                "{}",
                c.name
            );
        }
        assert!(controller_revision_name(&"x".repeat(300), "1234567890").len() <= 253);
    }
}
