#!/bin/bash
# Issue 40's storage scenarios under `kcm run` against `kcm apiserver` with `kcm sim` (3 nodes),
# driven by the stock kubectl. Prints one "ok"/"FAIL" line per check; exits 1 on any failure.
#   KCM=target/debug/kcm bash bench-scripts/storage-scenarios.sh
set -u
KCM=${KCM:?set KCM to a kcm binary}; D=${D:-$(mktemp -d)}
mkdir -p $D
$KCM apiserver --data-dir $D/api --listen 127.0.0.1:0 > $D/api.log 2>&1 &
API=$!
for i in $(seq 100); do [ -f $D/api/kubeconfig ] && break; sleep 0.2; done
export KUBECONFIG=$D/api/kubeconfig
$KCM sim --kubeconfig $KUBECONFIG --nodes 3 --assign-pod-cidrs > $D/sim.log 2>&1 &
SIM=$!
$KCM run --kubeconfig $KUBECONFIG --secure-port=0 --leader-elect=false > $D/run.log 2>&1 &
RUN=$!
trap 'kill $RUN $SIM $API 2>/dev/null; wait 2>/dev/null' EXIT
failed=0
check() { # description expected command...
  local what=$1 want=$2; shift 2
  local got
  for _ in $(seq 60); do
    got=$("$@" 2>/dev/null)
    [ "$got" = "$want" ] && { echo "ok   $what: $got"; return; }
    sleep 1
  done
  echo "FAIL $what: want '$want', got '$got'"; failed=1
}
jp() { kubectl get "$1" "$2" -o jsonpath="$3"; }
# A 1Gi ReadWriteOnce claim of the default class, and a pod using the claim of its name.
claim() { kubectl apply -f - > /dev/null <<EOF
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $1}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
EOF
}
pod() { kubectl apply -f - > /dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  containers: [{name: c, image: nginx}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: $1}}]
EOF
}
for i in $(seq 60); do
  [ "$(kubectl get nodes --no-headers 2>/dev/null | grep -c ' Ready')" -ge 3 ] && break; sleep 1
done

# 1. A pre-created Retain volume binds; after the claim goes it is Released and not rebound.
kubectl apply -f - > /dev/null <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: manual}
provisioner: kubernetes.io/no-provisioner
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: kept}
spec: {capacity: {storage: 2Gi}, accessModes: [ReadWriteOnce], storageClassName: manual,
       persistentVolumeReclaimPolicy: Retain, hostPath: {path: /tmp/kept}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: first}
spec: {accessModes: [ReadWriteOnce], storageClassName: manual, resources: {requests: {storage: 1Gi}}}
EOF
check "Retain volume bound" "Bound kept" jp pvc first '{.status.phase} {.spec.volumeName}'
kubectl delete pvc first > /dev/null
check "Retain volume released" "Released" jp pv kept '{.status.phase}'
kubectl apply -f - > /dev/null <<EOF
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: second}
spec: {accessModes: [ReadWriteOnce], storageClassName: manual, resources: {requests: {storage: 1Gi}}}
EOF
check "a new claim gets an event from the PV controller" "persistentvolume-controller" \
  kubectl get events --field-selector involvedObject.name=second -o 'jsonpath={.items[0].source.component}'
check "the Released volume is not rebound" "Pending Released" \
  bash -c "echo \$(kubectl get pvc second -o jsonpath='{.status.phase}') \$(kubectl get pv kept -o jsonpath='{.status.phase}')"

# 2. A Delete class (the simulator's default) provisions, attaches, and deletes.
claim dyn; pod dyn
check "dynamic claim bound, pod running" "Bound Running" \
  bash -c "echo \$(kubectl get pvc dyn -o jsonpath='{.status.phase}') \$(kubectl get pod dyn -o jsonpath='{.status.phase}')"
PV=$(jp pvc dyn '{.spec.volumeName}'); NODE=$(jp pod dyn '{.spec.nodeName}')
check "WaitForFirstConsumer volume pinned to the pod's node" "$NODE" \
  jp pv "$PV" '{.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}'
check "VolumeAttachment for the pod's node" "$NODE $PV true" \
  kubectl get volumeattachments -o 'jsonpath={range .items[*]}{.spec.nodeName} {.spec.source.persistentVolumeName} {.status.attached}{end}'

# 3. Deleting a claim in use leaves it Terminating until its pod is deleted.
kubectl delete pvc dyn --wait=false > /dev/null
check "claim in use kept with its finalizer" '["kubernetes.io/pvc-protection"]' \
  bash -c "kubectl get pvc dyn -o jsonpath='{.metadata.deletionTimestamp}' | grep -q . && kubectl get pvc dyn -o jsonpath='{.metadata.finalizers}'"
kubectl delete pod dyn > /dev/null
check "claim gone with its pod" "" bash -c "kubectl get pvc dyn -o name 2>/dev/null"
check "its Delete volume gone" "" bash -c "kubectl get pv $PV -o name 2>/dev/null"
check "VolumeAttachment gone" "" kubectl get volumeattachments -o name

# 4. Expansion 1Gi -> 2Gi: FileSystemResizePending, then the new capacity on the next pod.
claim grow; pod grow
check "claim grow bound" "Bound" jp pvc grow '{.status.phase}'
kubectl delete pod grow > /dev/null
kubectl patch pvc grow -p '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}' > /dev/null
check "FileSystemResizePending, capacity still 1Gi" "True 1Gi" \
  jp pvc grow '{.status.conditions[?(@.type=="FileSystemResizePending")].status} {.status.capacity.storage}'
check "volume resized" "2Gi" jp pv "$(jp pvc grow '{.spec.volumeName}')" '{.spec.capacity.storage}'
pod grow
check "capacity 2Gi once a pod uses it" "2Gi " jp pvc grow '{.status.capacity.storage} {.status.conditions}'

# 5. A StatefulSet with claim templates, 0 -> 3 -> 0, claims deleted on scale-down.
kubectl apply -f - > /dev/null <<EOF
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 0
  serviceName: db
  selector: {matchLabels: {app: db}}
  persistentVolumeClaimRetentionPolicy: {whenScaled: Delete, whenDeleted: Retain}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: c, image: nginx}]}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
EOF
kubectl scale statefulset db --replicas=3 > /dev/null
check "3 replicas ready" "3" jp statefulset db '{.status.readyReplicas}'
check "3 claims bound" "data-db-0 Bound data-db-1 Bound data-db-2 Bound" \
  bash -c "kubectl get pvc -l app=db -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase} {end}' | sed 's/ \$//'"
kubectl scale statefulset db --replicas=0 > /dev/null
check "claims deleted on scale-down (whenScaled: Delete)" "" \
  bash -c "kubectl get pvc -l app=db -o name"

# 6. A generic ephemeral volume: its claim is the pod's and goes with it.
kubectl apply -f - > /dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: scratch}
spec:
  containers: [{name: c, image: nginx}]
  volumes:
  - name: tmp
    ephemeral:
      volumeClaimTemplate:
        spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
EOF
check "ephemeral claim bound and owned by the pod" "Bound Pod/scratch" \
  jp pvc scratch-tmp '{.status.phase} {.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}'
kubectl delete pod scratch > /dev/null
check "ephemeral claim garbage-collected with the pod" "" bash -c "kubectl get pvc scratch-tmp -o name 2>/dev/null"
exit $failed
