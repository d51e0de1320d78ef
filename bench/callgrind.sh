#!/usr/bin/env bash
# Instruction counts of kctl's podcount with the per-key history off and on,
# under valgrind's callgrind, against a control plane of its own: 50
# ReplicaSets x 3 Pods, then 50 relabels (BENCHMARKS.md beside it, History). Needs
# valgrind; takes about 6 minutes. Read the result with
#   callgrind_annotate --threshold=100 OUT/cg-on.out.1 | grep -E 'keyBook|resultOf'
# Go under callgrind: cgo off and no async preemption (callgrind aborts on
# the signals), and the profile is dumped with callgrind_control before the
# process is killed (it aborts on the SIGTERM Go's runtime handles). Its
# inclusive call graph is not usable for Go (goroutine stack switches);
# per-function counts and call counts are.
#   bash bench/callgrind.sh [OUT]    (OUT defaults to /tmp/kctl-callgrind)
set -u
cd "$(dirname "$0")/.."
D=${1:-/tmp/kctl-callgrind}
rm -rf "$D"; mkdir -p "$D/out"
go build -o .cache/bin/controlplane ./hack/controlplane || exit 1
K=$(.cache/bin/controlplane build | tail -1)/kubectl
(cd bench && CGO_ENABLED=0 go build -o "$D/podcount" ./podcount/kctl) || exit 1
.cache/bin/controlplane start -dir "$D/cp" || exit 1
trap '.cache/bin/controlplane stop -dir "$D/cp"' EXIT
export KUBECONFIG=$D/cp/kubeconfig
for mode in off on; do
  ns=cg-$mode
  "$K" create namespace $ns >/dev/null
  flag=""; [ $mode = on ] && flag=--history
  GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file="$D/out/cg-$mode.out" \
    "$D/podcount" --kubeconfig "$KUBECONFIG" --workers 2 --qps 500 $flag > "$D/out/log-$mode" 2>&1 &
  vp=$!
  sleep 20 # started and synced, under valgrind
  for i in $(seq 0 49); do
    uid=$("$K" -n $ns create -o jsonpath='{.metadata.uid}' -f - <<Y
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs-$i}
spec:
  replicas: 3
  selector: {matchLabels: {app: rs-$i}}
  template:
    metadata: {labels: {app: rs-$i}}
    spec: {containers: [{name: c, image: busybox}]}
Y
)
    for j in 0 1 2; do cat <<Y
---
apiVersion: v1
kind: Pod
metadata:
  name: rs-$i-p$j
  labels: {app: rs-$i}
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: rs-$i, uid: $uid, controller: true}]
spec: {containers: [{name: c, image: busybox}]}
Y
    done
  done > "$D/pods-$mode.yaml"
  "$K" -n $ns create -f "$D/pods-$mode.yaml" >/dev/null
  sleep 30
  for i in $(seq 0 49); do "$K" -n $ns label pod rs-$i-p1 app=moved --overwrite >/dev/null; done
  sleep 30
  # Every ReplicaSet should read 2 (3 Pods, one relabelled away).
  "$K" -n $ns get rs -o jsonpath='{range .items[*]}{.metadata.labels.pod-count}{" "}{end}' > "$D/out/labels-$mode"
  callgrind_control -d $vp >> "$D/out/log-$mode" 2>&1; sleep 5
  kill -KILL $vp 2>/dev/null; wait $vp
done
echo "profiles: $D/out/cg-off.out.1 $D/out/cg-on.out.1"
