//! Who is asking and what they may do: the request's [`user::UserInfo`], the [`authenticator::Authenticator`] of bearer tokens, and the [`authorizer::Authorizer`] the review APIs consult.
//!
//! kcm serves one identity: the admin token in the kubeconfig it writes authenticates as
//! [`user::UserInfo::admin`] (`kubernetes-admin`, in `system:masters`). Authorization is
//! upstream's bootstrap policy for the identities that exist: `system:masters` may do
//! everything (the `cluster-admin` binding), every authenticated user has the discovery,
//! basic-user and public-info-viewer roles. Requests are not checked against it yet — the
//! admin is the only caller — but the review APIs (`kubectl auth can-i`,
//! `subjectaccessreviews`) answer from it, so that a real RBAC authorizer plugs in behind the
//! same [`authorizer::Authorizer`] trait.

pub mod authenticator;
pub mod authorizer;
pub mod user;
