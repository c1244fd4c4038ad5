//! The review APIs: create-only, never stored, answered from the request's user and the server's authenticator and authorizer (upstream's `selfsubjectreview`, `tokenreview`, `selfsubjectaccessreview`, `selfsubjectrulesreview`, `subjectaccessreview` and `localsubjectaccessreview` `REST.Create`s).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::auth::authorizer::{Attributes, Decision, Rules, Target};
use crate::auth::user::UserInfo;
use crate::error::ApiError;
use crate::object;
use crate::pointer::At;
use crate::registry::strategy::{RequestContext, Strategy};
use crate::validation::FieldError;

/// The audience kube-apiserver's tokens carry by default (`--api-audiences` defaults to the
/// service account issuer).
pub const DEFAULT_AUDIENCE: &str = crate::auth::authenticator::API_AUDIENCE;

/// `authentication.k8s.io/v1` SelfSubjectReview: who the requester is.
#[derive(Debug, Default)]
pub struct SelfSubjectReviewStrategy;

impl Strategy for SelfSubjectReviewStrategy {
    fn prepare_for_create_in(
        &self,
        obj: &mut Value,
        request: &RequestContext<'_>,
    ) -> Result<(), ApiError> {
        *obj = json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "SelfSubjectReview",
            "metadata": {"creationTimestamp": object::now_rfc3339()},
            "status": {"userInfo": request.user.to_json()},
        });
        Ok(())
    }
}

/// `authentication.k8s.io/v1` TokenReview: whom a token authenticates. The registry
/// authenticates (asynchronously, as a ServiceAccount token's objects are read) and fills
/// the status with [`token_review_status`]; the strategy validates.
#[derive(Debug, Default)]
pub struct TokenReviewStrategy;

impl Strategy for TokenReviewStrategy {}

/// The token a TokenReview asks about; 400 without one, as upstream.
pub fn token_review_token(obj: &Value) -> Result<&str, ApiError> {
    let token = obj.at("/spec/token").and_then(Value::as_str).unwrap_or("");
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    Ok(token)
}

/// The audiences a TokenReview asks about (`spec.audiences`; empty: the API server's).
pub fn token_review_audiences(obj: &Value) -> Vec<String> {
    obj.at("/spec/audiences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Fills a TokenReview's status with whom its token authenticates and for which of the
/// requested audiences (`None`: nobody, or none of the audiences), and why a recognised token
/// was refused (`status.error`).
pub fn token_review_status(
    obj: &mut Value,
    found: Option<&(UserInfo, Vec<String>)>,
    error: Option<&str>,
) {
    let status = match (found, error) {
        (Some((user, audiences)), _) => {
            json!({"authenticated": true, "user": user.to_json(), "audiences": audiences})
        }
        // Upstream omits `authenticated: false` (omitempty) and keeps an empty user.
        (None, Some(error)) => json!({"user": {}, "error": error}),
        (None, None) => json!({"user": {}}),
    };
    obj["status"] = status;
}

/// Which access review a strategy answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessReview {
    /// `selfsubjectaccessreviews`: the requester's own access.
    SelfSubject,
    /// `subjectaccessreviews`: the access of the user the spec names.
    Subject,
    /// `localsubjectaccessreviews`: as `Subject`, within the request's namespace.
    LocalSubject,
}

/// The strategy of the three access reviews.
#[derive(Debug)]
pub struct AccessReviewStrategy {
    /// Which review.
    pub review: AccessReview,
}

impl Strategy for AccessReviewStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let spec = obj.get("spec");
        let present = |k: &str| spec.and_then(|s| s.get(k)).filter(|v| !v.is_null());
        let (resource, non_resource) = (
            present("resourceAttributes"),
            present("nonResourceAttributes"),
        );
        match (resource, non_resource) {
            (Some(_), Some(n)) => errs.push(FieldError::invalid(
                "spec.nonResourceAttributes",
                n.clone(),
                "cannot be specified in combination with resourceAttributes",
            )),
            (None, None) => errs.push(FieldError::invalid(
                "spec.resourceAttributes",
                "null",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )),
            _ => {}
        }
        if self.review != AccessReview::SelfSubject {
            let user = spec
                .and_then(|s| s.get("user"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let groups = spec
                .and_then(|s| s.get("groups"))
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            if user.is_empty() && groups == 0 {
                errs.push(FieldError::invalid(
                    "spec.user",
                    user,
                    "at least one of user or group must be specified",
                ));
            }
        }
        let metadata = obj.get("metadata").and_then(Value::as_object);
        let allowed: &[&str] = match self.review {
            AccessReview::LocalSubject => &["namespace", "managedFields"],
            _ => &["managedFields"],
        };
        let extra_meta = metadata.is_some_and(|m| {
            m.iter()
                .any(|(k, v)| !allowed.contains(&k.as_str()) && !is_zero(v))
        });
        if extra_meta {
            let why = if self.review == AccessReview::LocalSubject {
                "must be empty except for namespace"
            } else {
                "must be empty"
            };
            errs.push(FieldError::invalid(
                "metadata",
                obj.get("metadata").cloned().unwrap_or(Value::Null),
                why,
            ));
        }
        if self.review == AccessReview::LocalSubject {
            let namespace = object::namespace(obj);
            if let Some(r) = resource {
                let requested = r.get("namespace").and_then(Value::as_str).unwrap_or("");
                if requested != namespace {
                    errs.push(FieldError::invalid(
                        "spec.resourceAttributes.namespace",
                        requested,
                        "must match metadata.namespace",
                    ));
                }
            }
            if let Some(n) = non_resource {
                errs.push(FieldError::invalid(
                    "spec.nonResourceAttributes",
                    n.clone(),
                    "disallowed on this kind of request",
                ));
            }
        }
        errs
    }

    fn prepare_for_create_in(
        &self,
        obj: &mut Value,
        request: &RequestContext<'_>,
    ) -> Result<(), ApiError> {
        let subject = match self.review {
            AccessReview::SelfSubject => request.user.clone(),
            AccessReview::Subject | AccessReview::LocalSubject => subject_of(obj.get("spec")),
        };
        let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
        let field = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let (verb, target_fields);
        let attrs = if let Some(r) = spec.get("resourceAttributes").filter(|r| !r.is_null()) {
            verb = field(r, "verb");
            target_fields = [
                field(r, "namespace"),
                field(r, "group"),
                field(r, "resource"),
                field(r, "subresource"),
                field(r, "name"),
            ];
            Attributes {
                user: &subject,
                verb: &verb,
                target: Target::Resource {
                    namespace: &target_fields[0],
                    group: &target_fields[1],
                    resource: &target_fields[2],
                    subresource: &target_fields[3],
                    name: &target_fields[4],
                },
            }
        } else {
            let n = spec
                .get("nonResourceAttributes")
                .cloned()
                .unwrap_or(Value::Null);
            verb = field(&n, "verb");
            target_fields = [
                field(&n, "path"),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ];
            Attributes {
                user: &subject,
                verb: &verb,
                target: Target::NonResource {
                    path: &target_fields[0],
                },
            }
        };
        let (allowed, denied, reason) = match request.authorizer.authorize(&attrs) {
            Decision::Allow(r) => (true, false, r),
            Decision::Deny(r) => (false, true, r),
            Decision::NoOpinion(r) => (false, false, r),
        };
        let mut status = Map::new();
        status.insert("allowed".to_owned(), json!(allowed));
        if denied {
            status.insert("denied".to_owned(), json!(true));
        }
        if !reason.is_empty() {
            status.insert("reason".to_owned(), json!(reason));
        }
        obj["status"] = Value::Object(status);
        Ok(())
    }
}

/// Whether a metadata value is Go's zero value (`creationTimestamp: null` and the like,
/// which kubectl sends).
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Bool(b) => !b,
    }
}

/// The user a SubjectAccessReview spec names.
fn subject_of(spec: Option<&Value>) -> UserInfo {
    let field = |k: &str| {
        spec.and_then(|s| s.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let groups = spec
        .and_then(|s| s.get("groups"))
        .and_then(Value::as_array)
        .map(|g| {
            g.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let extra: BTreeMap<String, Vec<String>> = spec
        .and_then(|s| s.get("extra"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let values = v
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_owned)
                                .collect()
                        })
                        .unwrap_or_default();
                    (k.clone(), values)
                })
                .collect()
        })
        .unwrap_or_default();
    UserInfo {
        username: field("user"),
        uid: field("uid"),
        groups,
        extra,
    }
}

/// `authorization.k8s.io/v1` SelfSubjectRulesReview: what the requester may do in a
/// namespace.
#[derive(Debug, Default)]
pub struct SelfSubjectRulesReviewStrategy;

impl Strategy for SelfSubjectRulesReviewStrategy {
    fn prepare_for_create_in(
        &self,
        obj: &mut Value,
        request: &RequestContext<'_>,
    ) -> Result<(), ApiError> {
        let namespace = obj
            .at("/spec/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        if namespace.is_empty() {
            return Err(ApiError::bad_request("no namespace on request"));
        }
        let rules = request.authorizer.rules_for(request.user, namespace);
        // Upstream answers with a fresh object: status only.
        *obj = json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectRulesReview",
            "metadata": {},
            "spec": {},
            "status": rules_json(&rules),
        });
        Ok(())
    }
}

/// A `SubjectRulesReviewStatus`.
fn rules_json(rules: &Rules) -> Value {
    let resource: Vec<Value> = rules
        .resource_rules
        .iter()
        .map(|r| {
            let mut rule =
                json!({"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources});
            if !r.resource_names.is_empty() {
                rule["resourceNames"] = json!(r.resource_names);
            }
            rule
        })
        .collect();
    let non_resource: Vec<Value> = rules
        .non_resource_rules
        .iter()
        .map(|r| json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}))
        .collect();
    json!({"resourceRules": resource, "nonResourceRules": non_resource, "incomplete": rules.incomplete})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::authenticator::StaticToken;
    use crate::auth::authorizer::BootstrapPolicy;

    fn context<'a>(user: &'a UserInfo, authn: &'a StaticToken) -> RequestContext<'a> {
        RequestContext {
            user,
            namespace: "",
            authenticator: authn,
            authorizer: &BootstrapPolicy,
        }
    }

    #[test]
    fn self_subject_review_names_the_requester() {
        let admin = UserInfo::admin();
        let authn = StaticToken::new("t", UserInfo::admin());
        let mut obj = json!({"metadata": {}});
        SelfSubjectReviewStrategy
            .prepare_for_create_in(&mut obj, &context(&admin, &authn))
            .expect("answered");
        assert_eq!(
            obj["status"],
            json!({"userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}})
        );
    }

    #[test]
    fn token_reviews() {
        let mut good = json!({"spec": {"token": "s3cret"}});
        assert_eq!(token_review_token(&good).expect("token"), "s3cret");
        token_review_status(
            &mut good,
            Some(&(UserInfo::admin(), vec![DEFAULT_AUDIENCE.to_owned()])),
            None,
        );
        assert_eq!(good["status"]["authenticated"], true);
        assert_eq!(good["status"]["user"]["username"], "kubernetes-admin");
        assert_eq!(good["status"]["audiences"], json!([DEFAULT_AUDIENCE]));
        let mut bad = json!({"spec": {"token": "nope"}});
        token_review_status(&mut bad, None, None);
        assert_eq!(bad["status"], json!({"user": {}}));
        let mut expired = json!({"spec": {"token": "a.b.c"}});
        token_review_status(&mut expired, None, Some("token has expired"));
        assert_eq!(
            expired["status"],
            json!({"user": {}, "error": "token has expired"})
        );
        let err = token_review_token(&json!({"spec": {}})).expect_err("no token");
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "token is required for TokenReview in authentication")
        );
    }

    #[test]
    fn access_reviews_ask_the_authorizer_about_the_right_user() {
        let admin = UserInfo::admin();
        let authn = StaticToken::new("t", UserInfo::admin());
        let ctx = context(&admin, &authn);
        let own = AccessReviewStrategy {
            review: AccessReview::SelfSubject,
        };
        let mut mine = json!({"spec": {"resourceAttributes": {"verb": "create", "resource": "pods", "namespace": "default"}}});
        assert!(own.validate(&mine).is_empty());
        own.prepare_for_create_in(&mut mine, &ctx)
            .expect("answered");
        assert_eq!(mine["status"], json!({"allowed": true}));

        let other = AccessReviewStrategy {
            review: AccessReview::Subject,
        };
        let mut bob = json!({"spec": {"user": "bob", "groups": ["system:authenticated"],
            "resourceAttributes": {"verb": "create", "resource": "pods"}}});
        assert!(other.validate(&bob).is_empty());
        other
            .prepare_for_create_in(&mut bob, &ctx)
            .expect("answered");
        assert_eq!(bob["status"], json!({"allowed": false}));
        let mut discovery = json!({"spec": {"user": "bob", "groups": ["system:authenticated"],
            "nonResourceAttributes": {"verb": "get", "path": "/version"}}});
        other
            .prepare_for_create_in(&mut discovery, &ctx)
            .expect("answered");
        assert_eq!(discovery["status"]["allowed"], true);
        assert!(
            discovery["status"]["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("RBAC: allowed by"))
        );
    }

    #[test]
    fn access_review_validation() {
        let errs = |review: AccessReview, obj: Value| -> Vec<String> {
            AccessReviewStrategy { review }
                .validate(&obj)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            errs(
                AccessReview::SelfSubject,
                json!({"metadata": {"creationTimestamp": null}, "spec": {}})
            ),
            [
                r#"spec.resourceAttributes: Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified"#
            ]
        );
        assert_eq!(
            errs(
                AccessReview::Subject,
                json!({"metadata": {"name": "x"}, "spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}}})
            ),
            [
                r#"spec.user: Invalid value: "": at least one of user or group must be specified"#,
                r#"metadata: Invalid value: {"name":"x"}: must be empty"#
            ]
        );
        assert_eq!(
            errs(
                AccessReview::LocalSubject,
                json!({"metadata": {"namespace": "a"}, "spec": {"user": "u",
                "resourceAttributes": {"namespace": "b", "verb": "get", "resource": "pods"}}})
            ),
            [
                r#"spec.resourceAttributes.namespace: Invalid value: "b": must match metadata.namespace"#
            ]
        );
    }

    #[test]
    fn rules_reviews_list_the_bootstrap_rules() {
        let admin = UserInfo::admin();
        let authn = StaticToken::new("t", UserInfo::admin());
        let mut obj = json!({"spec": {"namespace": "default"}});
        SelfSubjectRulesReviewStrategy
            .prepare_for_create_in(&mut obj, &context(&admin, &authn))
            .expect("answered");
        assert_eq!(
            obj["status"]["resourceRules"][0],
            json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})
        );
        assert_eq!(obj["status"]["incomplete"], false);
        let err = SelfSubjectRulesReviewStrategy
            .prepare_for_create_in(&mut json!({"spec": {}}), &context(&admin, &authn))
            .expect_err("no namespace");
        assert_eq!(err.code, 400);
    }
}
