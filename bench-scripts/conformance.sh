#!/usr/bin/env bash
# Kubernetes' conformance tests (e2e.test v1.36.2, ../shared/conformance/) against a fresh `kcm up`.
#
# usage: bench-scripts/conformance.sh [sqlite|etcd|split] [FOCUS_REGEX] [SKIP_REGEX]
#   sqlite (default)  kcm up on its SQLite store
#   etcd              kcm up --etcd-servers on a throwaway etcd (needs the `etcd` binary)
#   split             the three parts as separate processes, as on a real cluster: kcm apiserver
#                     (SQLite), kcm sim (scheduler, 3 nodes, provisioner) and kcm run (the
#                     controller manager, kube-controller-manager's flags, leader election on)
#   FOCUS/SKIP        as ../shared/conformance/run.sh; with neither, exactly the targets
#                     (../shared/conformance/targets.txt) are run.
# env: KCM      the binary (default target/release/kcm; build it with cargo build --release -p kcm)
#      CONFORMANCE  the conformance folder (default ../shared/conformance)
#      OUT      report directory (default conformance-report-<store>)
#      PROCS    parallel ginkgo processes (default 4)
#      TARGETS  the list of tests to run when no FOCUS is given (default the targets.txt there)
# Run from the repository root. It starts kcm up on 127.0.0.1 with a temporary data dir,
# waits for its nodes to be Ready, runs the tests, prints the summary and stops the cluster.
# A full target run takes 20-40 minutes on a 2-core machine.
set -euo pipefail
STORE=${1:-sqlite}
FOCUS=${2:-}
SKIP=${3:-}
KCM=$(realpath "${KCM:-target/release/kcm}")
CONFORMANCE=$(realpath "${CONFORMANCE:-../shared/conformance}")
export OUT=${OUT:-$PWD/conformance-report-$STORE}
export PROCS=${PROCS:-4}
DIR=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT

extra=()
if [ "$STORE" = etcd ]; then
  port=$((20000 + RANDOM % 20000))
  etcd --data-dir "$DIR/etcd" --listen-client-urls "http://127.0.0.1:$port" \
    --advertise-client-urls "http://127.0.0.1:$port" \
    --listen-peer-urls "http://127.0.0.1:$((port + 1))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((port + 1))" \
    --initial-cluster "default=http://127.0.0.1:$((port + 1))" >"$DIR/etcd.log" 2>&1 &
  pids+=($!)
  extra=(--etcd-servers "http://127.0.0.1:$port")
elif [ "$STORE" != sqlite ] && [ "$STORE" != split ]; then
  echo "store must be sqlite, etcd or split, not $STORE" >&2
  exit 2
fi

if [ "$STORE" = split ]; then
  "$KCM" apiserver --data-dir "$DIR/data" --listen 127.0.0.1:0 >"$DIR/up.out" 2>"$DIR/up.err" &
else
  "$KCM" up --data-dir "$DIR/data" --listen 127.0.0.1:0 "${extra[@]}" >"$DIR/up.out" 2>"$DIR/up.err" &
fi
pids+=($!)
for _ in $(seq 600); do [ -s "$DIR/data/kubeconfig" ] && break; sleep 0.2; done
[ -s "$DIR/data/kubeconfig" ] || { echo "kcm wrote no kubeconfig:" >&2; tail "$DIR/up.err" >&2; exit 1; }
export KUBECONFIG=$DIR/data/kubeconfig
if [ "$STORE" = split ]; then
  # kube-controller-manager's flags as kubeadm passes them (pod CIDRs from the node IPAM
  # controller, one service account per controller); the HTTPS endpoint on a free port.
  "$KCM" run --kubeconfig "$KUBECONFIG" --secure-port=0 --allocate-node-cidrs=true \
    --cluster-cidr=10.244.0.0/16 --service-cluster-ip-range=10.96.0.0/12 \
    --use-service-account-credentials=true >"$DIR/run.out" 2>"$DIR/run.err" &
  pids+=($!)
  "$KCM" sim --kubeconfig "$KUBECONFIG" --nodes 3 >"$DIR/sim.out" 2>"$DIR/sim.err" &
  pids+=($!)
fi
for _ in $(seq 300); do
  ready=$(kubectl get nodes --no-headers 2>/dev/null | grep -c ' Ready' || true)
  [ "$ready" -ge 1 ] && break
  sleep 0.5
done
echo "kcm ($STORE) at $(kubectl config view -o jsonpath='{.clusters[0].cluster.server}'); report in $OUT"

rc=0
if [ -z "$FOCUS" ] && [ -z "$SKIP" ]; then
  TARGETS="${TARGETS:-$CONFORMANCE/targets.txt}" "$CONFORMANCE/run.sh" "$KUBECONFIG" || rc=$?
else
  "$CONFORMANCE/run.sh" "$KUBECONFIG" "$FOCUS" "${SKIP:-\[Serial\]|\[Disruptive\]}" || rc=$?
fi
cp "$DIR/up.err" "$OUT/kcm-up.log" 2>/dev/null || true
cp "$DIR/run.err" "$OUT/kcm-run.log" 2>/dev/null || true
cp "$DIR/sim.err" "$OUT/kcm-sim.log" 2>/dev/null || true
exit $rc
