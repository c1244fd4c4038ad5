#!/bin/bash
# kcm run at kube-controller-manager's default flags against kcm apiserver + kcm sim:
# 20 Deployments x 25 replicas on 20 nodes, timed by kcm bench --kubeconfig.
set -u
KCM=${KCM:?set KCM to a kcm binary}; D=${D:-$(mktemp -d)}; EXTRA=${EXTRA:-}
mkdir -p $D
$KCM apiserver --data-dir $D/api --listen 127.0.0.1:0 > $D/api.log 2>&1 &
API=$!
for i in $(seq 100); do [ -f $D/api/kubeconfig ] && break; sleep 0.2; done
K=$D/api/kubeconfig
$KCM sim --kubeconfig $K --nodes 20 --assign-pod-cidrs > $D/sim.log 2>&1 &
SIM=$!
KCM_LOG=warn $KCM run --kubeconfig $K --secure-port=0 $EXTRA > $D/run.log 2>&1 &
RUN=$!
sleep 10
cpu() { awk '{print ($14+$15)/100}' /proc/$1/stat; }
rss() { grep -E "VmRSS|VmHWM" /proc/$1/status | awk '{printf "%s %d MiB  ", $1, $2/1024}'; }
r0=$(cpu $RUN); a0=$(cpu $API); s0=$(cpu $SIM)
$KCM bench --kubeconfig $K --deployments 20 --replicas 25 --json $D/bench.json --svg $D/bench.svg > $D/bench.log 2>&1
echo "bench exit $?"
grep -E "time to all available|pods available" $D/bench.log | tail -2
echo "kcm run CPU $(echo "$(cpu $RUN) - $r0" | bc) s; $(rss $RUN)"
echo "kcm apiserver CPU $(echo "$(cpu $API) - $a0" | bc) s; $(rss $API)"
echo "kcm sim CPU $(echo "$(cpu $SIM) - $s0" | bc) s; $(rss $SIM)"
URL=$(grep server: $K | awk '{print $2}')
curl -sk -H "Authorization: Bearer $(cat $D/api/token)" $URL/metrics > $D/api-metrics.txt
grep '^apiserver_request_total' $D/api-metrics.txt | grep -v 'verb="WATCH"\|verb="LIST"\|verb="GET"' | sed 's/apiserver_request_total//' | sort -t' ' -k2 -rn | head -20
kill $RUN; wait $RUN 2>/dev/null; kill $SIM $API; wait 2>/dev/null
