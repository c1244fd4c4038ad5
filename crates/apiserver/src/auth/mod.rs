//! Who is asking and what they may do: the request's [`user::UserInfo`], the authenticators (admin token, [`client_cert`], [`service_account_authenticator`]) and the [`authorizer::Authorizer`].
//!
//! Authentication, as kube-apiserver's chain: a client certificate signed by the cluster CA
//! (CN = user, O = groups), else a bearer token — kcm's admin token, a ServiceAccount
//! token ([`service_account_token`], issued by `serviceaccounts/token`) or, with
//! `--enable-bootstrap-token-auth`, a bootstrap token ([`bootstrap_token_authenticator`]).
//! A request with no credentials is anonymous only on the public paths; bad credentials are
//! 401.

pub mod authenticator;
pub mod authorizer;
pub mod bootstrap_policy;
pub mod bootstrap_reconcile;
pub mod bootstrap_token_authenticator;
pub mod client_cert;
pub mod controller_policy;
pub mod rbac;
pub mod rbac_rule;
pub mod service_account_authenticator;
pub mod service_account_token;
pub mod user;
