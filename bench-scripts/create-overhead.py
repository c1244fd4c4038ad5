"""p50/p99 of ConfigMap creates over one keep-alive HTTPS connection, per credential.

Usage: python3 bench-scripts/create-overhead.py KUBECONFIG N SA_TOKEN (the token of a service
account allowed to create configmaps in namespace bench-c; namespaces bench-a, bench-b, bench-c
must exist). Needs PyYAML."""
import http.client, json, ssl, sys, time, base64, os, tempfile, yaml
kubeconfig = yaml.safe_load(open(sys.argv[1]))
n = int(sys.argv[2])
cluster = kubeconfig["clusters"][0]["cluster"]
user = kubeconfig["users"][0]["user"]
host, port = cluster["server"].removeprefix("https://").split(":")
ca = tempfile.NamedTemporaryFile(delete=False, suffix=".crt"); ca.write(base64.b64decode(cluster["certificate-authority-data"])); ca.close()

def ctx(cert=None):
    c = ssl.create_default_context(cafile=ca.name)
    if cert:
        c.load_cert_chain(*cert)
    return c

def run(label, headers, context, ns):
    conn = http.client.HTTPSConnection(host, int(port), context=context)
    lat = []
    for i in range(n):
        body = json.dumps({"metadata": {"name": f"cm-{i}"}, "data": {"k": "v"}})
        t = time.perf_counter()
        conn.request("POST", f"/api/v1/namespaces/{ns}/configmaps", body, {"Content-Type": "application/json", **headers})
        r = conn.getresponse(); r.read()
        lat.append(time.perf_counter() - t)
        assert r.status == 201, (label, r.status)
    lat.sort()
    print(f"{label:40s} n={n} p50={lat[n//2]*1e3:.2f} ms p99={lat[int(n*0.99)]*1e3:.2f} ms")

certdir = tempfile.mkdtemp()
crt, key = os.path.join(certdir, "c.crt"), os.path.join(certdir, "c.key")
open(crt, "wb").write(base64.b64decode(user["client-certificate-data"]))
open(key, "wb").write(base64.b64decode(user["client-key-data"]))
for ns, label, headers, context in [
    ("bench-a", "admin token (system:masters)", {"Authorization": f"Bearer {user['token']}"}, ctx()),
    ("bench-b", "admin client certificate", {}, ctx((crt, key))),
    ("bench-c", "service account token + RBAC RoleBinding", {"Authorization": f"Bearer {sys.argv[3]}"}, ctx()),
]:
    run(label, headers, context, ns)
