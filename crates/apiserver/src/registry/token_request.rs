//! `serviceaccounts/{name}/token`: a TokenRequest answered with a signed, bound service account token, as upstream's `TokenREST.Create`.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::auth::service_account_token::{Claims, ObjectRef, TokenIssuer};
use crate::error::{ApiError, GroupKind, Result};
use crate::object;
use crate::registry::Registry;
use crate::registry::resource::ResourceDef;
use crate::validation::FieldError;

/// A token's lifetime when the request names none (the type's default).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The shortest lifetime a request may ask for (upstream: 10 minutes).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// The longest (upstream: 2^32 seconds).
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

const TOKEN_REQUEST: GroupKind<'static> = GroupKind {
    group: "authentication.k8s.io",
    kind: "TokenRequest",
};

impl Registry {
    /// Issues a token for service account `namespace/name` per `request` (a TokenRequest):
    /// the audiences asked for (the API audiences by default), `expirationSeconds` (one hour
    /// by default, at least ten minutes), bound to the Pod or Secret `boundObjectRef` names
    /// when it still exists with that uid.
    pub async fn create_token(
        &self,
        serviceaccounts: &ResourceDef,
        namespace: &str,
        name: &str,
        request: Value,
        dry_run: bool,
    ) -> Result<Value> {
        let issuer: Arc<TokenIssuer> = self.token_issuer().ok_or_else(ApiError::path_not_found)?;
        let kind = request
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("TokenRequest");
        if kind != "TokenRequest" {
            return Err(ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type TokenRequest): kind {kind:?} does not match"
            )));
        }
        let body_name = object::name(&request);
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(
                "name in URL does not match name in TokenRequest body",
            ));
        }
        let spec = request.get("spec").cloned().unwrap_or_else(|| json!({}));
        let expiration = match spec.get("expirationSeconds") {
            None | Some(Value::Null) => DEFAULT_EXPIRATION_SECONDS,
            Some(v) => v.as_i64().ok_or_else(|| {
                ApiError::bad_request("spec.expirationSeconds must be an integer")
            })?,
        };
        let mut errs = Vec::new();
        if expiration < MIN_EXPIRATION_SECONDS {
            errs.push(FieldError::invalid(
                "spec.expirationSeconds",
                expiration,
                "may not specify a duration less than 10 minutes",
            ));
        }
        if expiration > MAX_EXPIRATION_SECONDS {
            errs.push(FieldError::invalid(
                "spec.expirationSeconds",
                expiration,
                "may not specify a duration larger than 2^32 seconds",
            ));
        }
        if !errs.is_empty() {
            return Err(ApiError::invalid(TOKEN_REQUEST, name, &errs));
        }
        let audiences: Vec<String> = spec
            .get("audiences")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .filter(|a: &Vec<String>| !a.is_empty())
            .unwrap_or_else(|| issuer.api_audiences().to_vec());

        let sa = self.get(serviceaccounts, namespace, name).await?;
        let now = jiff::Timestamp::now().as_second();
        let mut claims = Claims::new(
            issuer.issuer(),
            namespace,
            name,
            object::uid(&sa),
            audiences.clone(),
            now,
            expiration,
        );
        if let Some(bound) = spec.get("boundObjectRef").filter(|b| !b.is_null()) {
            self.bind_claims(&mut claims, namespace, name, bound)
                .await?;
        }
        let token = if dry_run {
            String::new()
        } else {
            issuer
                .issue(&claims)
                .map_err(|e| ApiError::internal(format!("signing the token: {e}")))?
        };
        let expires = jiff::Timestamp::from_second(claims.exp)
            .map_err(ApiError::internal)?
            .to_string();
        let mut spec = spec;
        spec["audiences"] = json!(audiences);
        spec["expirationSeconds"] = json!(expiration);
        Ok(json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "creationTimestamp": object::now_rfc3339(),
            },
            "spec": spec,
            "status": {"token": token, "expirationTimestamp": expires},
        }))
    }

    /// Adds the bound object's claims (a Pod also binds its node), as upstream's
    /// `TokenREST.Create` does after checking the object.
    async fn bind_claims(
        &self,
        claims: &mut Claims,
        namespace: &str,
        sa_name: &str,
        bound: &Value,
    ) -> Result<()> {
        let field = |k: &str| bound.get(k).and_then(Value::as_str).unwrap_or("");
        let (kind, api_version, name, uid) = (
            field("kind"),
            field("apiVersion"),
            field("name"),
            field("uid"),
        );
        if !api_version.is_empty() && api_version != "v1" {
            return Err(ApiError::bad_request(format!(
                "cannot bind token to object of type {api_version}, Kind={kind}"
            )));
        }
        let def = match kind {
            "Pod" => &crate::resources::pod::PODS,
            "Secret" => &crate::resources::core::SECRETS,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "cannot bind token to object of type {kind}"
                )));
            }
        };
        let obj = self.get(def, namespace, name).await?;
        let actual_uid = object::uid(&obj);
        if !uid.is_empty() && uid != actual_uid {
            return Err(ApiError::conflict(
                def.group_resource(),
                name,
                &format!(
                    "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
                ),
            ));
        }
        let reference = Some(ObjectRef {
            name: name.to_owned(),
            uid: actual_uid.to_owned(),
        });
        if kind == "Pod" {
            let pod_sa = object::str_at(&obj, &["spec", "serviceAccountName"]).unwrap_or("default");
            if pod_sa != sa_name {
                return Err(ApiError::conflict(
                    def.group_resource(),
                    name,
                    &format!(
                        "cannot bind token for serviceaccount {sa_name:?} to pod running with different serviceaccount name."
                    ),
                ));
            }
            claims.kubernetes.pod = reference;
            if let Some(node) =
                object::str_at(&obj, &["spec", "nodeName"]).filter(|n| !n.is_empty())
            {
                claims.kubernetes.node = Some(ObjectRef {
                    name: node.to_owned(),
                    uid: String::new(),
                });
            }
        } else {
            claims.kubernetes.secret = reference;
        }
        Ok(())
    }
}
