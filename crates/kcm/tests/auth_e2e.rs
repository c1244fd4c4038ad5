//! Who may do what on `kcm up`, driven by the installed `kubectl` as the issue's first acceptance point: a ServiceAccount with a Role to read pods in one namespace gets a token from `kubectl create token`; `get pods` works there, 403 elsewhere and for `create`; `auth can-i --list --as` matches the Role; an expired, a wrong-audience token and a deleted account's token get 401; binding oneself to `cluster-admin` without holding it is refused. Runs on SQLite and on etcd; skipped (with a note) when `kubectl` (or, for the etcd run, `etcd`) is not installed.

mod kcm_up;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kcm_apiserver::auth::service_account_token::{Claims, DEFAULT_ISSUER, TokenIssuer};
use kcm_up::{Backend, Up, kubectl_with as kubectl};

/// The whole test's bound (the issue asks for < 30 s; the start of a debug build is most).
const DEADLINE: Duration = Duration::from_secs(30);
const NS: &str = "team";

fn kubectl_ok(kubeconfig: &Path, args: &[&str]) -> String {
    let (ok, stdout, stderr) = kubectl(kubeconfig, args);
    assert!(ok, "kubectl {args:?}:\n{stdout}\n{stderr}");
    stdout
}

/// `kubectl` expected to fail with `want` in its error output.
fn kubectl_fails(kubeconfig: &Path, args: &[&str], want: &str) -> String {
    let (ok, stdout, stderr) = kubectl(kubeconfig, args);
    assert!(!ok, "kubectl {args:?} succeeded:\n{stdout}");
    assert!(
        stderr.contains(want),
        "kubectl {args:?}: want {want:?} in\n{stderr}"
    );
    stderr
}

/// A kubeconfig for the same cluster whose only credential is `token` (the admin one carries a
/// client certificate, which the server would authenticate first, as kube-apiserver does).
fn token_kubeconfig(admin: &Path, token: &str, path: PathBuf) -> PathBuf {
    let text = std::fs::read_to_string(admin).expect("kubeconfig");
    let lines: Vec<String> = text
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            !l.starts_with("client-certificate-data:") && !l.starts_with("client-key-data:")
        })
        .map(|l| match l.split_once("token:") {
            Some((indent, _)) if indent.trim().is_empty() => format!("{indent}token: {token}"),
            _ => l.to_owned(),
        })
        .collect();
    assert!(lines.iter().any(|l| l.trim() == format!("token: {token}")));
    std::fs::write(&path, lines.join("\n") + "\n").expect("write kubeconfig");
    path
}

/// Retries `f` (the RBAC cache follows the store through a watch) until it is true.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < until, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

kcm_up::on_each_backend!(
    service_account_tokens_and_rbac:
        service_account_tokens_and_rbac_with_kubectl_sqlite,
        service_account_tokens_and_rbac_with_kubectl_etcd
);

fn service_account_tokens_and_rbac(backend: &Backend) {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let up = Up::start(backend, &data, &["--nodes", "1"], "warn");
    let admin = up.kubeconfig.clone();

    // A service account that may read pods in `team`.
    kubectl_ok(&admin, &["create", "namespace", NS]);
    kubectl_ok(&admin, &["create", "serviceaccount", "ci", "-n", NS]);
    kubectl_ok(
        &admin,
        &[
            "create",
            "role",
            "pod-reader",
            "-n",
            NS,
            "--verb=get,list,watch",
            "--resource=pods",
        ],
    );
    kubectl_ok(
        &admin,
        &[
            "create",
            "rolebinding",
            "ci-reads-pods",
            "-n",
            NS,
            "--role=pod-reader",
            &format!("--serviceaccount={NS}:ci"),
        ],
    );
    let token = kubectl_ok(
        &admin,
        &["create", "token", "ci", "-n", NS, "--duration", "1h"],
    );
    let ci = token_kubeconfig(&admin, token.trim(), dir.path().join("ci.kubeconfig"));

    eventually("ci may list pods in team", || {
        kubectl(&ci, &["get", "pods", "-n", NS]).0
    });
    kubectl_fails(
        &ci,
        &["get", "pods", "-n", "default"],
        r#"pods is forbidden: User "system:serviceaccount:team:ci" cannot list resource "pods" in API group "" in the namespace "default""#,
    );
    kubectl_fails(
        &ci,
        &["run", "p", "-n", NS, "--image=nginx"],
        r#"pods is forbidden: User "system:serviceaccount:team:ci" cannot create resource "pods" in API group "" in the namespace "team""#,
    );

    // can-i as the account, through impersonation, lists what its Role says.
    let list = kubectl_ok(
        &admin,
        &[
            "auth",
            "can-i",
            "--list",
            "-n",
            NS,
            "--as=system:serviceaccount:team:ci",
        ],
    );
    let pods = list
        .lines()
        .find(|l| l.split_whitespace().next() == Some("pods"))
        .unwrap_or_else(|| panic!("no pods line in\n{list}"));
    assert!(pods.contains("[get list watch]"), "{list}");
    assert!(!list.contains("*.*"), "no admin rules: {list}");
    let (_, yes, _) = kubectl(
        &admin,
        &[
            "auth",
            "can-i",
            "create",
            "pods",
            "-n",
            NS,
            "--as=system:serviceaccount:team:ci",
        ],
    );
    assert_eq!(yes.trim(), "no");

    // 401s: a token for another audience, an expired one (signed with the data dir's key),
    // and a deleted account's.
    let vault = kubectl_ok(
        &admin,
        &["create", "token", "ci", "-n", NS, "--audience", "vault"],
    );
    let vault = token_kubeconfig(&admin, vault.trim(), dir.path().join("vault.kubeconfig"));
    kubectl_fails(&vault, &["get", "pods", "-n", NS], "Unauthorized");

    let uid = kubectl_ok(
        &admin,
        &[
            "get",
            "sa",
            "ci",
            "-n",
            NS,
            "-o",
            "jsonpath={.metadata.uid}",
        ],
    );
    let issuer =
        TokenIssuer::load_or_create(&data.join("pki"), DEFAULT_ISSUER).expect("the data dir's key");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let expired = Claims::new(
        DEFAULT_ISSUER,
        NS,
        "ci",
        uid.trim(),
        vec![DEFAULT_ISSUER.to_owned()],
        now - 7200,
        3600,
    );
    let expired = issuer.issue(&expired).expect("signs");
    let expired = token_kubeconfig(&admin, &expired, dir.path().join("expired.kubeconfig"));
    kubectl_fails(&expired, &["get", "pods", "-n", NS], "Unauthorized");

    // A user allowed to create bindings may not bind themself to cluster-admin.
    kubectl_ok(&admin, &["create", "serviceaccount", "binder", "-n", NS]);
    kubectl_ok(
        &admin,
        &[
            "create",
            "clusterrole",
            "binding-manager",
            "--verb=create",
            "--resource=clusterrolebindings.rbac.authorization.k8s.io",
        ],
    );
    kubectl_ok(
        &admin,
        &[
            "create",
            "clusterrolebinding",
            "binder",
            "--clusterrole=binding-manager",
            &format!("--serviceaccount={NS}:binder"),
        ],
    );
    let binder = kubectl_ok(&admin, &["create", "token", "binder", "-n", NS]);
    let binder = token_kubeconfig(&admin, binder.trim(), dir.path().join("binder.kubeconfig"));
    let escalate = [
        "create",
        "clusterrolebinding",
        "make-me-admin",
        "--clusterrole=cluster-admin",
        "--serviceaccount=team:binder",
    ];
    eventually("the binder's binding is in effect", || {
        let (_, _, err) = kubectl(&binder, &escalate);
        err.contains("is attempting to grant RBAC permissions not currently held")
    });
    kubectl_fails(&binder, &escalate, "forbidden");

    // Deleting the account revokes its tokens.
    kubectl_ok(&admin, &["delete", "serviceaccount", "ci", "-n", NS]);
    kubectl_fails(&ci, &["get", "pods", "-n", NS], "Unauthorized");

    assert!(started.elapsed() < DEADLINE, "took {:?}", started.elapsed());
    drop(up);
}

kcm_up::on_each_backend!(
    legacy_service_account_token_secrets:
        legacy_token_secrets_are_filled_in_authenticate_and_go_with_their_account_sqlite,
        legacy_token_secrets_are_filled_in_authenticate_and_go_with_their_account_etcd
);

/// The service account token controller on `kcm up`: a `kubernetes.io/service-account-token`
/// Secret for an account gets `token`, `ca.crt`, `namespace` and the account's uid; the token
/// authenticates as the account (`kubectl auth whoami`), which stamps the Secret's
/// `kubernetes.io/legacy-token-last-used` label; deleting the account deletes the Secret, and
/// the token no longer authenticates.
fn legacy_service_account_token_secrets(backend: &Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let up = Up::start(backend, &dir.path().join("data"), &["--nodes", "1"], "warn");
    let admin = up.kubeconfig.clone();
    kubectl_ok(&admin, &["create", "namespace", "legacy"]);
    kubectl_ok(
        &admin,
        &["create", "serviceaccount", "builder", "-n", "legacy"],
    );
    let manifest = dir.path().join("secret.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: builder-token\n  namespace: legacy\n  \
         annotations:\n    kubernetes.io/service-account.name: builder\n\
         type: kubernetes.io/service-account-token\n",
    )
    .expect("manifest");
    kubectl_ok(&admin, &["apply", "-f", manifest.to_str().expect("utf-8")]);
    let field = |template: &str| {
        kubectl(
            &admin,
            &[
                "get",
                "secret",
                "builder-token",
                "-n",
                "legacy",
                "-o",
                &format!("go-template={template}"),
            ],
        )
    };
    let token = up.wait_for("the token secret filled in", || {
        let (ok, token, _) = field("{{if .data.token}}{{.data.token | base64decode}}{{end}}");
        (ok && !token.is_empty()).then_some(token)
    });
    let (_, namespace, _) = field("{{index .data \"namespace\" | base64decode}}");
    assert_eq!(namespace, "legacy");
    let (_, ca, _) = field("{{index .data \"ca.crt\" | base64decode}}");
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    let uid = kubectl_ok(
        &admin,
        &[
            "get",
            "sa",
            "builder",
            "-n",
            "legacy",
            "-o",
            "jsonpath={.metadata.uid}",
        ],
    );
    let (_, annotated, _) =
        field("{{index .metadata.annotations \"kubernetes.io/service-account.uid\"}}");
    assert_eq!(annotated, uid);

    let as_builder = token_kubeconfig(&admin, &token, dir.path().join("builder.kubeconfig"));
    let whoami = kubectl_ok(
        &as_builder,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
    );
    assert_eq!(whoami, "system:serviceaccount:legacy:builder");
    let (_, last_used, _) =
        field("{{index .metadata.labels \"kubernetes.io/legacy-token-last-used\"}}");
    assert_eq!(last_used.len(), "2006-01-02".len(), "{last_used:?}");

    kubectl_ok(
        &admin,
        &["delete", "serviceaccount", "builder", "-n", "legacy"],
    );
    up.wait_for("the token secret deleted with its account", || {
        let (ok, _, stderr) = field("{{.metadata.name}}");
        (!ok && stderr.contains("NotFound")).then_some(())
    });
    kubectl_fails(&as_builder, &["auth", "whoami"], "Unauthorized");
}

kcm_up::on_each_backend!(
    certificates_for_users_and_bootstrapping_nodes:
        csrs_are_signed_for_users_and_auto_approved_for_bootstrapping_nodes_sqlite,
        csrs_are_signed_for_users_and_auto_approved_for_bootstrapping_nodes_etcd
);

/// A key and a PEM CSR for `common_name` in `organizations`.
fn csr(common_name: &str, organizations: &[&str]) -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    let mut dn = rcgen::DistinguishedName::new();
    dn.push(rcgen::DnType::CommonName, common_name);
    for o in organizations {
        dn.push(rcgen::DnType::OrganizationName, *o);
    }
    params.distinguished_name = dn;
    let request = params.serialize_request(&key).expect("csr");
    (key.serialize_pem(), request.pem().expect("pem"))
}

/// Writes and applies a CertificateSigningRequest `name` for `pem` to `signer` with `usages`.
fn apply_csr(kubeconfig: &Path, dir: &Path, name: &str, pem: &str, signer: &str, usages: &[&str]) {
    use base64::Engine;
    let manifest = serde_json::json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(pem),
            "signerName": signer,
            "usages": usages,
            "expirationSeconds": 3600,
        },
    });
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, manifest.to_string()).expect("manifest");
    kubectl_ok(kubeconfig, &["create", "-f", path.to_str().expect("utf-8")]);
}

/// A kubeconfig for the same cluster whose only credential is a client certificate.
fn cert_kubeconfig(admin: &Path, cert_b64: &str, key_pem: &str, path: PathBuf) -> PathBuf {
    use base64::Engine;
    let key_b64 = base64::engine::general_purpose::STANDARD.encode(key_pem);
    let text = std::fs::read_to_string(admin).expect("kubeconfig");
    let lines: Vec<String> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("token:"))
        .map(|l| match l.split_once("client-certificate-data:") {
            Some((indent, _)) => format!("{indent}client-certificate-data: {cert_b64}"),
            None => match l.split_once("client-key-data:") {
                Some((indent, _)) => format!("{indent}client-key-data: {key_b64}"),
                None => l.to_owned(),
            },
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").expect("write kubeconfig");
    path
}

/// `kubectl auth whoami` with `kubeconfig`: the user name, a space, the groups as JSON.
fn whoami(kubeconfig: &Path) -> String {
    kubectl_ok(
        kubeconfig,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
        ],
    )
}

/// The CSR signing and approving controllers on `kcm up`, as the issue's acceptance: a
/// `kubernetes.io/kube-apiserver-client` CSR approved with `kubectl certificate approve` gets a
/// certificate that authenticates as its subject (`kubectl auth whoami`); a bootstrap token
/// (`--enable-bootstrap-token-auth`) authenticates as `system:bootstrap:<id>`, and its node
/// client CSR is auto-approved (`AutoApproved`) and signed once the bootstrappers hold
/// kubeadm's two bindings.
fn certificates_for_users_and_bootstrapping_nodes(backend: &Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let up = Up::start(
        backend,
        &dir.path().join("data"),
        &["--nodes", "1", "--enable-bootstrap-token-auth"],
        "warn",
    );
    let admin = up.kubeconfig.clone();
    let jsonpath = |kubeconfig: &Path, csr: &str, path: &str| {
        kubectl(
            kubeconfig,
            &["get", "csr", csr, "-o", &format!("jsonpath={path}")],
        )
        .1
    };

    // A user's client certificate, approved by hand.
    let (alice_key, alice_csr) = csr("alice", &["devs"]);
    apply_csr(
        &admin,
        dir.path(),
        "alice",
        &alice_csr,
        "kubernetes.io/kube-apiserver-client",
        &["client auth"],
    );
    let out = kubectl_ok(&admin, &["certificate", "approve", "alice"]);
    assert!(out.contains("approved"), "{out}");
    let cert = up.wait_for("alice's certificate", || {
        let cert = jsonpath(&admin, "alice", "{.status.certificate}");
        (!cert.is_empty()).then_some(cert)
    });
    let as_alice = cert_kubeconfig(
        &admin,
        &cert,
        &alice_key,
        dir.path().join("alice.kubeconfig"),
    );
    assert_eq!(
        whoami(&as_alice),
        r#"alice ["devs","system:authenticated"]"#
    );

    // A bootstrap token, as `kubeadm token create` writes it, and kubeadm's bindings.
    let token_secret = dir.path().join("token.yaml");
    std::fs::write(
        &token_secret,
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: bootstrap-token-abcdef\n  \
         namespace: kube-system\ntype: bootstrap.kubernetes.io/token\nstringData:\n  \
         token-id: abcdef\n  token-secret: 0123456789abcdef\n  \
         usage-bootstrap-authentication: \"true\"\n  \
         auth-extra-groups: system:bootstrappers:kubeadm:default-node-token\n",
    )
    .expect("token secret");
    kubectl_ok(
        &admin,
        &["apply", "-f", token_secret.to_str().expect("utf-8")],
    );
    for (binding, role) in [
        ("kubeadm:kubelet-bootstrap", "system:node-bootstrapper"),
        (
            "kubeadm:node-autoapprove-bootstrap",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
        ),
    ] {
        kubectl_ok(
            &admin,
            &[
                "create",
                "clusterrolebinding",
                binding,
                &format!("--clusterrole={role}"),
                "--group=system:bootstrappers:kubeadm:default-node-token",
            ],
        );
    }
    let bootstrap = token_kubeconfig(
        &admin,
        "abcdef.0123456789abcdef",
        dir.path().join("bootstrap.kubeconfig"),
    );
    assert_eq!(
        whoami(&bootstrap),
        r#"system:bootstrap:abcdef ["system:bootstrappers","system:bootstrappers:kubeadm:default-node-token","system:authenticated"]"#
    );
    kubectl_fails(
        &token_kubeconfig(
            &admin,
            "abcdef.0123456789abcdee",
            dir.path().join("wrong.kubeconfig"),
        ),
        &["auth", "whoami"],
        "Unauthorized",
    );

    // The kubelet's TLS bootstrap: a node client CSR from the bootstrap identity.
    let (_, node_csr) = csr("system:node:worker-1", &["system:nodes"]);
    eventually("the bootstrapper may create CSRs", || {
        kubectl(
            &bootstrap,
            &["auth", "can-i", "create", "certificatesigningrequests"],
        )
        .0
    });
    apply_csr(
        &bootstrap,
        dir.path(),
        "node-csr-worker-1",
        &node_csr,
        "kubernetes.io/kube-apiserver-client-kubelet",
        &["digital signature", "client auth"],
    );
    assert_eq!(
        jsonpath(&admin, "node-csr-worker-1", "{.spec.username}"),
        "system:bootstrap:abcdef"
    );
    up.wait_for("the node's CSR approved and signed", || {
        let approved = jsonpath(
            &admin,
            "node-csr-worker-1",
            "{.status.conditions[?(@.type==\"Approved\")].reason}",
        );
        let cert = jsonpath(&admin, "node-csr-worker-1", "{.status.certificate}");
        (approved == "AutoApproved" && !cert.is_empty()).then_some(())
    });
    let table = kubectl_ok(&admin, &["get", "csr", "node-csr-worker-1"]);
    assert!(table.contains("Approved,Issued"), "{table}");
}
