//! The identity a request runs as (apiserver's `user.Info`) and the well-known user and group names.

use std::collections::BTreeMap;

/// The group every authenticated user is in (`system:authenticated`).
pub const ALL_AUTHENTICATED: &str = "system:authenticated";
/// The group of unauthenticated requests (`system:unauthenticated`).
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
/// The privileged group whose members may do everything (`system:masters`).
pub const SYSTEM_MASTERS: &str = "system:masters";
/// The user name of the admin token kcm writes into its kubeconfig.
pub const ADMIN_USER: &str = "kubernetes-admin";
/// The user the server itself acts as (upstream's loopback identity).
pub const APISERVER_USER: &str = "system:apiserver";
/// The user name of unauthenticated requests (`system:anonymous`).
pub const ANONYMOUS_USER: &str = "system:anonymous";
/// The prefix of every service account's user name.
pub const SERVICE_ACCOUNT_USER_PREFIX: &str = "system:serviceaccount:";
/// The group of every service account (`system:serviceaccounts`).
pub const ALL_SERVICE_ACCOUNTS: &str = "system:serviceaccounts";

/// An authenticated identity: name, uid, groups and extra attributes, as apiserver's
/// `user.DefaultInfo`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name, e.g. `kubernetes-admin`.
    pub username: String,
    /// A unique id; empty when the authenticator has none.
    pub uid: String,
    /// The groups, `system:authenticated` included for authenticated users.
    pub groups: Vec<String>,
    /// Extra attributes (`authentication.kubernetes.io/...`).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The identity of kcm's admin token: `kubernetes-admin` in `system:masters` (as a
    /// kubeadm admin.conf user), plus `system:authenticated`.
    pub fn admin() -> Self {
        Self {
            username: ADMIN_USER.to_owned(),
            uid: String::new(),
            groups: vec![SYSTEM_MASTERS.to_owned(), ALL_AUTHENTICATED.to_owned()],
            extra: BTreeMap::new(),
        }
    }

    /// The server's own identity, for writes it makes itself (bootstrap objects).
    pub fn apiserver() -> Self {
        Self {
            username: APISERVER_USER.to_owned(),
            uid: String::new(),
            groups: vec![SYSTEM_MASTERS.to_owned(), ALL_AUTHENTICATED.to_owned()],
            extra: BTreeMap::new(),
        }
    }

    /// The identity of an unauthenticated request (`system:anonymous` in
    /// `system:unauthenticated`), as upstream's anonymous authenticator.
    pub fn anonymous() -> Self {
        Self {
            username: ANONYMOUS_USER.to_owned(),
            groups: vec![ALL_UNAUTHENTICATED.to_owned()],
            ..Self::default()
        }
    }

    /// The identity of service account `namespace/name`, as upstream's
    /// `serviceaccount.UserInfo`: `system:serviceaccount:NS:NAME` in `system:serviceaccounts`
    /// and `system:serviceaccounts:NS` (and `system:authenticated`).
    pub fn service_account(namespace: &str, name: &str, uid: &str) -> Self {
        Self {
            username: service_account_username(namespace, name),
            uid: uid.to_owned(),
            groups: vec![
                ALL_SERVICE_ACCOUNTS.to_owned(),
                format!("{ALL_SERVICE_ACCOUNTS}:{namespace}"),
                ALL_AUTHENTICATED.to_owned(),
            ],
            extra: BTreeMap::new(),
        }
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// The user as the `userInfo` of an authentication review (`username`, `uid`,
    /// `groups`, `extra`; empty fields left out, as Go's `omitempty`).
    pub fn to_json(&self) -> serde_json::Value {
        let mut out = serde_json::Map::new();
        if !self.username.is_empty() {
            out.insert("username".to_owned(), self.username.clone().into());
        }
        if !self.uid.is_empty() {
            out.insert("uid".to_owned(), self.uid.clone().into());
        }
        if !self.groups.is_empty() {
            out.insert("groups".to_owned(), self.groups.clone().into());
        }
        if !self.extra.is_empty() {
            let extra: serde_json::Map<String, serde_json::Value> = self
                .extra
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().into()))
                .collect();
            out.insert("extra".to_owned(), extra.into());
        }
        serde_json::Value::Object(out)
    }
}

/// `system:serviceaccount:NS:NAME`.
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_USER_PREFIX}{namespace}:{name}")
}

/// The `(namespace, name)` of a service account user name, as upstream's
/// `serviceaccount.SplitUsername`; `None` for other users.
pub fn split_service_account_username(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix(SERVICE_ACCOUNT_USER_PREFIX)?;
    let (namespace, name) = rest.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then_some((namespace, name))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn admin_is_a_master_and_renders_without_empty_fields() {
        let admin = UserInfo::admin();
        assert!(admin.in_group(SYSTEM_MASTERS));
        assert!(admin.in_group(ALL_AUTHENTICATED));
        assert!(!admin.in_group("system:nodes"));
        assert_eq!(
            admin.to_json(),
            json!({"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]})
        );
    }

    #[test]
    fn service_account_names_round_trip() {
        let sa = UserInfo::service_account("ns", "ci", "u1");
        assert_eq!(sa.username, "system:serviceaccount:ns:ci");
        assert!(sa.in_group("system:serviceaccounts:ns"));
        assert!(sa.in_group(ALL_AUTHENTICATED));
        assert_eq!(
            split_service_account_username(&sa.username),
            Some(("ns", "ci"))
        );
        for bad in [
            "system:serviceaccount:ns",
            "system:serviceaccount::x",
            "bob",
            "system:serviceaccount:a:b:c",
        ] {
            assert_eq!(split_service_account_username(bad), None, "{bad}");
        }
    }
}
