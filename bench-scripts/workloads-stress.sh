#!/usr/bin/env bash
# Run from the repository root after `cargo build --release -p kcm`; needs kubectl and bc.
# Results and discussion: BENCHMARKS.md, "DaemonSet and StatefulSet controllers".
# Stress: 100 simulated nodes, 5 DaemonSets (500 pods), a rolling update of all five, then a
# 100-replica Parallel StatefulSet. Prints wall times and the kcm up process's CPU seconds.
set -euo pipefail
KCM=${KCM:-target/release/kcm}
DIR=$(mktemp -d)
$KCM up --data-dir "$DIR" --listen 127.0.0.1:0 --nodes 100 --pod-ready-delay 1s >"$DIR/out" 2>"$DIR/err" &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null || true' EXIT
until [ -s "$DIR/kubeconfig" ]; do sleep 0.2; done
export KUBECONFIG="$DIR/kubeconfig"
until [ "$(kubectl get nodes --no-headers 2>/dev/null | grep -c ' Ready')" = 100 ]; do sleep 0.5; done
cpu() { awk '{print ($14+$15)/100}' /proc/$PID/stat; }
now() { date +%s.%N; }
ds() {
cat <<YAML
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent-$1}
spec:
  selector: {matchLabels: {app: agent-$1}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 10%}}
  template:
    metadata: {labels: {app: agent-$1}}
    spec: {containers: [{name: agent, image: "registry.k8s.io/pause:3.9"}]}
---
YAML
}
c0=$(cpu); t0=$(now)
for i in 1 2 3 4 5; do ds $i; done | kubectl apply -f - >/dev/null
for i in 1 2 3 4 5; do kubectl rollout status ds/agent-$i --timeout=600s >/dev/null; done
t1=$(now); c1=$(cpu)
echo "5 DaemonSets x 100 nodes: $(kubectl get pods --no-headers | grep -c Running) pods Running in $(echo "$t1-$t0" | bc) s, kcm up CPU $(echo "$c1-$c0" | bc) s"
for i in 1 2 3 4 5; do kubectl set image ds/agent-$i agent=registry.k8s.io/pause:3.10 >/dev/null; done
for i in 1 2 3 4 5; do kubectl rollout status ds/agent-$i --timeout=900s >/dev/null; done
t2=$(now); c2=$(cpu)
echo "rolling update of all 5 (maxUnavailable 10%): $(echo "$t2-$t1" | bc) s, kcm up CPU $(echo "$c2-$c1" | bc) s"
kubectl delete ds --all --wait=false >/dev/null
until [ "$(kubectl get pods --no-headers 2>/dev/null | wc -l)" = 0 ]; do sleep 0.5; done
c3=$(cpu); t3=$(now)
cat <<YAML | kubectl apply -f - >/dev/null
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: big}
spec:
  serviceName: big
  replicas: 100
  podManagementPolicy: Parallel
  selector: {matchLabels: {app: big}}
  template:
    metadata: {labels: {app: big}}
    spec: {containers: [{name: c, image: "registry.k8s.io/pause:3.9"}]}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
YAML
kubectl rollout status sts/big --timeout=600s >/dev/null
until [ "$(kubectl get pvc --no-headers | grep -c Bound)" = 100 ]; do sleep 0.5; done
t4=$(now); c4=$(cpu)
echo "Parallel StatefulSet of 100 (with 100 claims Bound): $(echo "$t4-$t3" | bc) s, kcm up CPU $(echo "$c4-$c3" | bc) s"
echo "kcm up RSS: $(ps -o rss= -p $PID) kB"
