//! certificates.k8s.io/v1 certificatesigningrequests: the requestor recorded on create, the main/`status`/`approval` split of upstream's three strategies, request and condition validation (upstream's `csrStrategy`, `csrStatusStrategy`, `csrApprovalStrategy`, `ValidateCertificateSigningRequest*`).
//!
//! The server signs nothing itself: an approved request stays `Approved` until a signer
//! (kcm's `certificatesigningrequest-signing-controller`, or any other) writes
//! `status.certificate` through `/status`.

use std::collections::HashSet;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use serde_json::{Map, Value, json};
use x509_parser::prelude::FromDer;

use crate::error::ApiError;
use crate::object;
use crate::pointer::At;
use crate::registry::strategy::{RequestContext, Strategy, decode_as};
use crate::resources::go_values;
use crate::validation::{FieldError, NameRule};

/// The key usages upstream accepts, sorted as its error messages list them.
const USAGES: [&str; 23] = [
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// The signer name of the v1beta1-only legacy signer, refused through v1.
const LEGACY_UNKNOWN_SIGNER: &str = "kubernetes.io/legacy-unknown";

/// Decodes a CSR; a missing `request` or `signerName` reads as empty (Go's zero values), so
/// that validation answers 422 instead of a decode error.
pub fn decode(mut obj: Value) -> Result<Value, String> {
    if let Some(spec) = obj
        .as_object_mut()
        .map(|m| m.entry("spec").or_insert_with(|| json!({})))
        && let Some(spec) = spec.as_object_mut()
    {
        spec.entry("request").or_insert_with(|| json!(""));
        spec.entry("signerName").or_insert_with(|| json!(""));
    }
    decode_as::<CertificateSigningRequest>(obj)
}

/// What an update may change, as upstream's `certificateValidationOptions`.
#[derive(Clone, Copy, Debug, Default)]
struct Options {
    /// `/approval`: Approved and Denied conditions may be added or changed.
    approval_conditions: bool,
    /// `/status`: `status.certificate` may be set.
    certificate: bool,
}

/// The CSR strategy; `/status` and `/approval` updates go through their hooks.
#[derive(Debug, Default)]
pub struct CsrStrategy;

impl Strategy for CsrStrategy {
    fn name_rule(&self) -> NameRule {
        // Upstream accepts any name (`ValidateCertificateRequestName`); path segments keep
        // it addressable.
        NameRule::PathSegment
    }

    fn prepare_for_create_in(
        &self,
        obj: &mut Value,
        request: &RequestContext<'_>,
    ) -> Result<(), ApiError> {
        // Users cannot claim another identity nor create pre-approved requests.
        let user = request.user;
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            for field in ["username", "uid", "groups", "extra"] {
                spec.remove(field);
            }
            if !user.username.is_empty() {
                spec.insert("username".to_owned(), json!(user.username));
            }
            if !user.uid.is_empty() {
                spec.insert("uid".to_owned(), json!(user.uid));
            }
            if !user.groups.is_empty() {
                spec.insert("groups".to_owned(), json!(user.groups));
            }
            if !user.extra.is_empty() {
                let extra: Map<String, Value> = user
                    .extra
                    .iter()
                    .map(|(k, v)| (k.clone(), json!(v)))
                    .collect();
                spec.insert("extra".to_owned(), Value::Object(extra));
            }
        }
        obj["status"] = json!({});
        Ok(())
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        // The main resource changes metadata only: spec and status are kept.
        for field in ["spec", "status"] {
            match old.get(field) {
                Some(v) => new[field] = v.clone(),
                None => {
                    if let Some(m) = new.as_object_mut() {
                        m.remove(field);
                    }
                }
            }
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_csr(obj, Options::default())
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_update(new, old, Options::default())
    }

    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        // The signer sets the certificate and its own conditions; the approval conditions
        // keep their stored values (preserveConditionInstances). Added or removed ones are
        // left for validation to refuse.
        for t in ["Approved", "Denied"] {
            preserve_condition_instances(new, old, t);
        }
        populate_condition_timestamps(new, old);
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_update(
            new,
            old,
            Options {
                certificate: true,
                ..Options::default()
            },
        )
    }

    fn prepare_for_approval_update(&self, new: &mut Value, old: &Value) {
        // Only the conditions change; the certificate is the signer's.
        match old.at("/status/certificate") {
            Some(cert) => new["status"]["certificate"] = cert.clone(),
            None => {
                if let Some(status) = new.get_mut("status").and_then(Value::as_object_mut) {
                    status.remove("certificate");
                }
            }
        }
        populate_condition_timestamps(new, old);
    }

    fn validate_approval_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_update(
            new,
            old,
            Options {
                approval_conditions: true,
                ..Options::default()
            },
        )
    }
}

fn conditions(obj: &Value) -> &[Value] {
    obj.at("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn condition_type(c: &Value) -> &str {
    c.get("type").and_then(Value::as_str).unwrap_or("")
}

/// Upstream's `preserveConditionInstances`: when `new` has as many conditions of type `t`
/// as `old`, they take the stored values.
fn preserve_condition_instances(new: &mut Value, old: &Value, t: &str) {
    let old_of_type: Vec<Value> = conditions(old)
        .iter()
        .filter(|c| condition_type(c) == t)
        .cloned()
        .collect();
    let Some(list) = new
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    let new_indices: Vec<usize> = list
        .iter()
        .enumerate()
        .filter(|(_, c)| condition_type(c) == t)
        .map(|(i, _)| i)
        .collect();
    if new_indices.len() != old_of_type.len() {
        return;
    }
    for (i, value) in new_indices.into_iter().zip(old_of_type) {
        list[i] = value;
    }
}

/// Upstream's `populateConditionTimestamps`: a condition without `lastUpdateTime` gets now;
/// without `lastTransitionTime`, the stored one of the same type and status, or now.
fn populate_condition_timestamps(new: &mut Value, old: &Value) {
    let now = object::now_rfc3339();
    let old_conditions = conditions(old).to_vec();
    let Some(list) = new
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in list.iter_mut().filter(|c| c.is_object()) {
        if c.get("lastUpdateTime").is_none_or(Value::is_null) {
            c["lastUpdateTime"] = json!(now);
        }
        if c.get("lastTransitionTime").is_none_or(Value::is_null) {
            let previous = old_conditions.iter().find(|o| {
                o.get("type") == c.get("type")
                    && o.get("status") == c.get("status")
                    && o.get("lastTransitionTime").is_some_and(|t| !t.is_null())
            });
            c["lastTransitionTime"] = previous
                .and_then(|o| o.get("lastTransitionTime").cloned())
                .unwrap_or_else(|| json!(now));
        }
    }
}

/// Upstream's `validateCertificateSigningRequestUpdate`: the create rules, plus no removed
/// Approved/Denied/Failed conditions, approval conditions only through `/approval`, the
/// certificate only through `/status` and never replaced.
fn validate_update(new: &Value, old: &Value, opts: Options) -> Vec<FieldError> {
    let mut errs = validate_csr(new, opts);
    let of_type = |o: &Value, t: &str| -> Vec<Value> {
        conditions(o)
            .iter()
            .filter(|c| condition_type(c) == t)
            .cloned()
            .collect()
    };
    for t in ["Approved", "Denied", "Failed"] {
        if of_type(new, t).len() < of_type(old, t).len() {
            errs.push(FieldError::forbidden(
                "status.conditions",
                format!("updates may not remove a condition of type {t:?}"),
            ));
        }
    }
    if !opts.approval_conditions {
        for t in ["Approved", "Denied"] {
            let (n, o) = (of_type(new, t), of_type(old, t));
            if n.len() > o.len() {
                errs.push(FieldError::forbidden(
                    "status.conditions",
                    format!("updates may not add a condition of type {t:?}"),
                ));
            } else if n.len() == o.len() && n != o {
                errs.push(FieldError::forbidden(
                    "status.conditions",
                    format!("updates may not modify a condition of type {t:?}"),
                ));
            }
        }
    }
    let certificate = |o: &Value| {
        o.at("/status/certificate")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    if certificate(new) != certificate(old) {
        if !opts.certificate {
            errs.push(FieldError::forbidden(
                "status.certificate",
                "updates may not set certificate content",
            ));
        } else if !certificate(old).is_empty() {
            errs.push(FieldError::forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            ));
        }
    }
    errs
}

/// Upstream's `validateCertificateSigningRequest` (through the v1 API: no legacy signer).
fn validate_csr(obj: &Value, opts: Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = obj.get("spec");
    let request = spec
        .and_then(|s| s.get("request"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if let Err(why) = check_request(request) {
        errs.push(go_values::invalid("spec.request", go_bytes(request), why));
    }
    let usages = spec
        .and_then(|s| s.get("usages"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if usages.is_empty() {
        errs.push(FieldError::required("spec.usages", ""));
    }
    let mut seen = HashSet::new();
    for (i, usage) in usages.iter().enumerate() {
        let usage = usage.as_str().unwrap_or("");
        if !USAGES.contains(&usage) {
            errs.push(FieldError::not_supported(
                format!("spec.usages[{i}]"),
                usage,
                &USAGES,
            ));
        }
        if !seen.insert(usage) {
            errs.push(FieldError::duplicate(format!("spec.usages[{i}]"), usage));
        }
    }
    let signer = spec
        .and_then(|s| s.get("signerName"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if signer == LEGACY_UNKNOWN_SIGNER {
        errs.push(FieldError::invalid(
            "spec.signerName",
            signer,
            "the legacy signerName is not allowed via this API version",
        ));
    } else {
        errs.extend(signer_name_errors(signer));
    }
    if let Some(seconds) = spec
        .and_then(|s| s.get("expirationSeconds"))
        .and_then(Value::as_i64)
        && seconds < 600
    {
        errs.push(FieldError::invalid(
            "spec.expirationSeconds",
            seconds,
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    errs.extend(condition_errors(obj, opts));
    let certificate = obj
        .at("/status/certificate")
        .and_then(Value::as_str)
        .unwrap_or("");
    if let Err(why) = check_certificate(certificate) {
        errs.push(go_values::invalid(
            "status.certificate",
            "\"<certificate data>\"".to_owned(),
            why,
        ));
    }
    errs
}

/// Upstream's `validateConditions`.
fn condition_errors(obj: &Value, _opts: Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen = HashSet::new();
    let (mut approved, mut denied) = (false, false);
    for (i, c) in conditions(obj).iter().enumerate() {
        let path = format!("status.conditions[{i}]");
        let t = condition_type(c);
        if t.is_empty() {
            errs.push(FieldError::required(format!("{path}.type"), ""));
        }
        let status = c.get("status").and_then(Value::as_str).unwrap_or("");
        let true_only = matches!(t, "Approved" | "Denied" | "Failed");
        if status.is_empty() {
            errs.push(FieldError::required(format!("{path}.status"), ""));
        } else if true_only && status != "True" {
            errs.push(FieldError::not_supported(
                format!("{path}.status"),
                status,
                &["True"],
            ));
        } else if !true_only && !["False", "True", "Unknown"].contains(&status) {
            errs.push(FieldError::not_supported(
                format!("{path}.status"),
                status,
                &["False", "True", "Unknown"],
            ));
        }
        match t {
            "Approved" => {
                approved = true;
                if denied {
                    errs.push(FieldError::invalid(
                        format!("{path}.type"),
                        t,
                        "Approved and Denied conditions are mutually exclusive",
                    ));
                }
            }
            "Denied" => {
                denied = true;
                if approved {
                    errs.push(FieldError::invalid(
                        format!("{path}.type"),
                        t,
                        "Approved and Denied conditions are mutually exclusive",
                    ));
                }
            }
            _ => {}
        }
        if !seen.insert(t.to_owned()) {
            errs.push(FieldError::duplicate(format!("{path}.type"), t));
        }
    }
    errs
}

/// Upstream's `ValidateSignerName`: `example.com/signer-name`.
fn signer_name_errors(signer: &str) -> Vec<FieldError> {
    const FIELD: &str = "spec.signerName";
    if signer.is_empty() {
        return vec![FieldError::required(FIELD, "")];
    }
    let segments: Vec<&str> = signer.split('/').collect();
    let [domain, path] = segments.as_slice() else {
        return vec![FieldError::invalid(
            FIELD,
            signer,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        )];
    };
    let mut errs = Vec::new();
    if domain.len() > 253 {
        errs.push(FieldError::too_long(FIELD, 253));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    if let Some(bad) = labels.iter().find(|l| !NameRule::Label.check(l).is_empty()) {
        for msg in NameRule::Label.check(bad) {
            errs.push(FieldError::invalid(
                FIELD,
                *domain,
                format!("validating label {bad:?}: {msg}"),
            ));
        }
    }
    if labels.len() < 2 {
        errs.push(FieldError::invalid(
            FIELD,
            *domain,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    if let Some(bad) = path
        .split('.')
        .find(|l| !NameRule::Subdomain.check(l).is_empty())
    {
        for msg in NameRule::Subdomain.check(bad) {
            errs.push(FieldError::invalid(
                FIELD,
                *path,
                format!("validating label {bad:?}: {msg}"),
            ));
        }
    }
    let max = 253 + (253 + 63 + 1) + 1;
    if signer.len() > max {
        errs.push(FieldError::too_long(FIELD, max));
    }
    errs
}

/// Decodes the base64 of a `[]byte` field; garbage decodes as empty (the typed decode has
/// already refused invalid base64).
fn base64_bytes(b64: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap_or_default()
}

/// `[]byte` as Go's `%#v` prints it.
fn go_bytes(b64: &str) -> String {
    let bytes = base64_bytes(b64);
    let hex: Vec<String> = bytes.iter().map(|b| format!("0x{b:x}")).collect();
    format!("[]byte{{{}}}", hex.join(", "))
}

/// Upstream's `validateCSR`: one PEM `CERTIFICATE REQUEST` block holding a PKCS#10 request
/// whose signature verifies.
fn check_request(b64: &str) -> Result<(), String> {
    let pem = base64_bytes(b64);
    let block = match x509_parser::pem::parse_x509_pem(&pem) {
        Ok((_, block)) if block.label == "CERTIFICATE REQUEST" => block,
        _ => return Err("PEM block type must be CERTIFICATE REQUEST".to_owned()),
    };
    let (_, csr) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&block.contents)
            .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    csr.verify_signature()
        .map_err(|e| format!("x509: signature verification failure: {e}"))
}

/// Upstream's `validateCertificate`: empty, or only `CERTIFICATE` PEM blocks that parse.
fn check_certificate(b64: &str) -> Result<(), String> {
    let data = base64_bytes(b64);
    if data.is_empty() {
        return Ok(());
    }
    let mut rest: &[u8] = &data;
    let mut blocks = 0;
    while let Ok((remaining, block)) = x509_parser::pem::parse_x509_pem(rest) {
        if block.label != "CERTIFICATE" {
            return Err(format!(
                "only CERTIFICATE PEM blocks are allowed, found {:?}",
                block.label
            ));
        }
        x509_parser::parse_x509_certificate(&block.contents)
            .map_err(|e| format!("x509: malformed certificate: {e}"))?;
        blocks += 1;
        if remaining.len() == rest.len() {
            break;
        }
        rest = remaining;
    }
    if blocks == 0 {
        return Err("must contain at least one CERTIFICATE PEM block".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use base64::Engine;

    use super::*;
    use crate::auth::authenticator::NoTokens;
    use crate::auth::authorizer::BootstrapPolicy;
    use crate::auth::user::UserInfo;

    /// A PEM certificate request signed by a fresh key, base64 as the API carries it.
    fn request_b64() -> String {
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec!["alice".to_owned()]).expect("params");
        let pem = params
            .serialize_request(&key)
            .expect("csr")
            .pem()
            .expect("pem");
        base64::engine::general_purpose::STANDARD.encode(pem)
    }

    fn csr(request: &str) -> Value {
        json!({"metadata": {"name": "alice"},
            "spec": {"request": request, "signerName": "kubernetes.io/kube-apiserver-client",
                     "usages": ["client auth"], "expirationSeconds": 86400}})
    }

    #[test]
    fn a_signed_request_is_valid_and_records_its_requestor() {
        let mut obj = decode(csr(&request_b64())).expect("decodes");
        let user = UserInfo::admin();
        let ctx = RequestContext {
            user: &user,
            namespace: "",
            authenticator: &NoTokens,
            authorizer: &BootstrapPolicy,
        };
        obj["spec"]["username"] = json!("mallory");
        obj["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}]});
        CsrStrategy
            .prepare_for_create_in(&mut obj, &ctx)
            .expect("prepared");
        assert_eq!(obj["spec"]["username"], "kubernetes-admin");
        assert_eq!(
            obj["spec"]["groups"],
            json!(["system:masters", "system:authenticated"])
        );
        assert_eq!(obj["status"], json!({}));
        assert!(
            CsrStrategy.validate(&obj).is_empty(),
            "{:?}",
            CsrStrategy.validate(&obj)
        );
    }

    #[test]
    fn requests_usages_and_signers_are_checked() {
        let not_pem = base64::engine::general_purpose::STANDARD.encode("hi");
        let mut obj = csr(&not_pem);
        obj["spec"]["usages"] = json!(["client auth", "teleport", "client auth"]);
        obj["spec"]["signerName"] = json!("example");
        obj["spec"]["expirationSeconds"] = json!(60);
        let errs: Vec<String> = CsrStrategy
            .validate(&obj)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs[0],
            "spec.request: Invalid value: []byte{0x68, 0x69}: PEM block type must be CERTIFICATE REQUEST"
        );
        assert!(errs[1].starts_with(r#"spec.usages[1]: Unsupported value: "teleport": supported values: "any", "cert sign""#), "{}", errs[1]);
        assert_eq!(errs[2], r#"spec.usages[2]: Duplicate value: "client auth""#);
        assert_eq!(
            errs[3],
            r#"spec.signerName: Invalid value: "example": must be a fully qualified domain and path of the form 'example.com/signer-name'"#
        );
        assert_eq!(
            errs[4],
            "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)"
        );
        // A PEM request whose signature does not match its content.
        let good = String::from_utf8(base64_bytes(&request_b64())).expect("utf8");
        let body: String = good.lines().filter(|l| !l.starts_with("-----")).collect();
        let mut der = base64::engine::general_purpose::STANDARD
            .decode(body)
            .expect("der");
        let last = der.len() - 1;
        der[last] ^= 0xff;
        let tampered = format!(
            "-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n",
            base64::engine::general_purpose::STANDARD.encode(der)
        );
        assert!(
            check_request(&base64::engine::general_purpose::STANDARD.encode(tampered)).is_err()
        );
    }

    #[test]
    fn approval_status_and_main_updates_change_only_their_parts() {
        let stored = {
            let mut o = decode(csr(&request_b64())).expect("decodes");
            o["status"] = json!({});
            o
        };
        // /approval adds an Approved condition with timestamps; the certificate is kept.
        let mut approved = stored.clone();
        approved["status"] = json!({"conditions": [{"type": "Approved", "status": "True", "reason": "KubectlApprove"}],
            "certificate": "Zm9v"});
        CsrStrategy.prepare_for_approval_update(&mut approved, &stored);
        assert!(approved.at("/status/certificate").is_none());
        assert!(approved["status"]["conditions"][0]["lastUpdateTime"].is_string());
        assert!(
            CsrStrategy
                .validate_approval_update(&approved, &stored)
                .is_empty()
        );
        // The same change through the main resource or /status is refused.
        assert_eq!(
            CsrStrategy.validate_status_update(&approved, &stored)[0].to_string(),
            r#"status.conditions: Forbidden: updates may not add a condition of type "Approved""#
        );
        // /status keeps the stored approval conditions' values, and refuses removing them.
        let mut status = approved.clone();
        status["status"]["conditions"] = json!([{"type": "Approved", "status": "True", "reason": "Forged"},
            {"type": "Failed", "status": "True"}]);
        CsrStrategy.prepare_for_status_update(&mut status, &approved);
        assert_eq!(
            status["status"]["conditions"][0],
            approved["status"]["conditions"][0]
        );
        assert_eq!(condition_type(&status["status"]["conditions"][1]), "Failed");
        assert!(
            CsrStrategy
                .validate_status_update(&status, &approved)
                .is_empty()
        );
        let mut removed = approved.clone();
        removed["status"]["conditions"] = json!([]);
        CsrStrategy.prepare_for_status_update(&mut removed, &approved);
        assert!(
            !CsrStrategy
                .validate_status_update(&removed, &approved)
                .is_empty()
        );
        // The main resource keeps spec and status.
        let mut main = approved.clone();
        main["spec"]["usages"] = json!(["server auth"]);
        main["status"] = json!({});
        CsrStrategy.prepare_for_update(&mut main, &approved);
        assert_eq!(main["spec"], approved["spec"]);
        assert_eq!(main["status"], approved["status"]);
        // Removing the approval is refused everywhere.
        assert!(
            CsrStrategy
                .validate_approval_update(&stored, &approved)
                .iter()
                .any(|e| e
                    .to_string()
                    .contains("updates may not remove a condition of type \"Approved\""))
        );
    }
}
