#!/bin/bash
# Storage stress (issue 40): kcm run at its default flags against kcm apiserver + kcm sim with
# 50 nodes; 1,000 claims (500 bind to pre-created local volumes, 500 are provisioned by the
# simulated CSI driver) used by 1,000 pods. Checks that every claim ends Bound exactly once
# and no volume is bound to two claims. Then it deletes 100 claims in use and checks that they
# stay (Terminating) until their pods are gone. Prints the time to all bound and running, and
# each process's CPU and RSS.
#   KCM=target/release/kcm bash bench-scripts/storage-stress.sh
set -u
KCM=${KCM:?set KCM to a kcm binary}; D=${D:-$(mktemp -d)}
NODES=${NODES:-50}; STATIC=${STATIC:-500}; DYNAMIC=${DYNAMIC:-500}
mkdir -p $D
$KCM apiserver --data-dir $D/api --listen 127.0.0.1:0 > $D/api.log 2>&1 &
API=$!
for i in $(seq 100); do [ -f $D/api/kubeconfig ] && break; sleep 0.2; done
export KUBECONFIG=$D/api/kubeconfig
$KCM sim --kubeconfig $KUBECONFIG --nodes $NODES --assign-pod-cidrs > $D/sim.log 2>&1 &
SIM=$!
KCM_LOG=warn $KCM run --kubeconfig $KUBECONFIG --secure-port=0 > $D/run.log 2>&1 &
RUN=$!
cleanup() { kill $RUN $SIM $API 2>/dev/null; wait 2>/dev/null; }
trap cleanup EXIT
for i in $(seq 120); do
  [ "$(kubectl get nodes --no-headers 2>/dev/null | grep -c ' Ready')" -ge "$NODES" ] && break
  sleep 1
done
mapfile -t HOSTS < <(kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
echo "nodes: ${#HOSTS[@]}"

# The local class and its pre-created volumes, spread over the nodes.
{
  cat <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
EOF
  for i in $(seq 0 $((STATIC - 1))); do
    h=${HOSTS[$((i % ${#HOSTS[@]}))]}
    cat <<EOF
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: local-$i}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local
  persistentVolumeReclaimPolicy: Retain
  local: {path: /mnt/disk-$i}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/hostname, operator: In, values: [$h]}
EOF
  done
} > $D/volumes.yaml
kubectl create -f $D/volumes.yaml > /dev/null || exit 1

claim_and_pod() { # name class
  cat <<EOF
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $1}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: $2
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: $1, labels: {app: storage-stress}}
spec:
  containers: [{name: c, image: busybox, resources: {requests: {cpu: 10m, memory: 16Mi}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: $1}}]
EOF
}
{
  for i in $(seq 0 $((STATIC - 1))); do claim_and_pod s-$i local; done
  for i in $(seq 0 $((DYNAMIC - 1))); do claim_and_pod d-$i standard; done
} > $D/workload.yaml
TOTAL=$((STATIC + DYNAMIC))

cpu() { awk '{print ($14+$15)/100}' /proc/$1/stat; }
rss() { grep -E "VmRSS|VmHWM" /proc/$1/status | awk '{printf "%s %d MiB  ", $1, $2/1024}'; }
r0=$(cpu $RUN); a0=$(cpu $API); s0=$(cpu $SIM)
start=$(date +%s.%N)
kubectl create -f $D/workload.yaml > /dev/null || exit 1
echo "created $TOTAL claims and pods in $(echo "$(date +%s.%N) - $start" | bc | cut -c1-5) s"
done_at=""
for i in $(seq 900); do
  bound=$(kubectl get pvc --no-headers | grep -c ' Bound ')
  running=$(kubectl get pods -l app=storage-stress --no-headers | grep -c ' Running ')
  if [ "$bound" -ge $TOTAL ] && [ "$running" -ge $TOTAL ]; then
    done_at=$(date +%s.%N); break
  fi
  [ $((i % 10)) -eq 0 ] && echo "  $(echo "$(date +%s.%N) - $start" | bc | cut -c1-5) s: $bound bound, $running running"
  sleep 1
done
if [ -z "$done_at" ]; then echo "FAIL: not all bound and running after 900 s"; exit 1; fi
echo "all $TOTAL claims Bound and pods Running after $(echo "$done_at - $start" | bc | cut -c1-5) s"
echo "kcm run CPU $(echo "$(cpu $RUN) - $r0" | bc) s; $(rss $RUN)"
echo "kcm apiserver CPU $(echo "$(cpu $API) - $a0" | bc) s; $(rss $API)"
echo "kcm sim CPU $(echo "$(cpu $SIM) - $s0" | bc) s; $(rss $SIM)"

# Bound exactly once: claims name distinct volumes, volumes point back at distinct claims.
kubectl get pvc -o jsonpath='{range .items[*]}{.metadata.name} {.spec.volumeName}{"\n"}{end}' > $D/claims.txt
kubectl get pv -o jsonpath='{range .items[*]}{.metadata.name} {.spec.claimRef.namespace}/{.spec.claimRef.name} {.status.phase}{"\n"}{end}' > $D/pvs.txt
dup_vols=$(awk '{print $2}' $D/claims.txt | sort | uniq -d | wc -l)
dup_claims=$(awk '$3=="Bound"{print $2}' $D/pvs.txt | sort | uniq -d | wc -l)
mismatch=$(awk 'NR==FNR{split($2,a,"/"); if ($3=="Bound") back[$1]=a[2]; next} back[$2]!=$1' $D/pvs.txt $D/claims.txt | wc -l)
static_on_local=$(grep -c '^s-[0-9]* local-' $D/claims.txt)
echo "volumes named by two claims: $dup_vols; claims bound by two volumes: $dup_claims; claim/volume mismatches: $mismatch; static claims on local volumes: $static_on_local/$STATIC"
misplaced=0
for i in $(seq 0 9); do
  vol=$(awk -v c=s-$i '$1==c{print $2}' $D/claims.txt)
  want=$(kubectl get pv $vol -o jsonpath='{.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}')
  got=$(kubectl get pod s-$i -o jsonpath='{.spec.nodeName}')
  [ "$want" = "$got" ] || misplaced=$((misplaced + 1))
done
echo "pods of the first 10 static claims not on their volume's node: $misplaced"

# Protection: claims in use stay until their pods go.
victims=$(for i in $(seq 0 49); do echo s-$i d-$i; done)
kubectl delete pvc $victims --wait=false > /dev/null
sleep 10
left=$(kubectl get pvc $victims --no-headers 2>/dev/null | wc -l)
echo "claims in use deleted: 100; still present 10 s later: $left"
kubectl delete pod $victims --wait=false > /dev/null
for i in $(seq 120); do
  left=$(kubectl get pvc $victims --no-headers 2>/dev/null | wc -l)
  [ "$left" -eq 0 ] && break
  sleep 1
done
echo "after their pods were deleted, claims left: $left (after ${i} s)"
