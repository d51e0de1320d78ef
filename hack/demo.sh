#!/usr/bin/env bash
# The demo a newcomer runs first (make demo): it builds (first time: ~6 min)
# and starts a local control plane (etcd + kube-apiserver), runs
# example/podcount against it, creates ReplicaSets and their Pods, shows the
# pod-count labels converging, changes the Pods, shows the labels follow, and
# stops everything it started, by PID, also on failure or Ctrl-C.
#
# Environment: DEMO_TIMEOUT (seconds to wait for each convergence, default 60).
set -euo pipefail
cd "$(dirname "$0")/.."

NS=kctl-demo
TIMEOUT=${DEMO_TIMEOUT:-60}
BIN=.cache/bin
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kctl-demo-XXXXXX")
CP_DIR=$WORK/controlplane # the control plane's files; `controlplane stop` removes it
LOG=$WORK/podcount.log
PODCOUNT_PID=

if [[ -t 1 ]]; then bold=$'\033[1m' plain=$'\033[0m'; else bold= plain=; fi
step() { printf '\n%s==> %s%s\n' "$bold" "$*" "$plain"; }
CP_BIN= # the control plane's binaries: $KCTL_CONTROLPLANE_BIN, else the per-user cache (controlplane build says)
kubectl() { "$CP_BIN/kubectl" --kubeconfig "$CP_DIR/kubeconfig" "$@"; }

cleanup() {
	local status=$?
	trap - EXIT INT TERM
	if [[ -n $PODCOUNT_PID ]] && kill -0 "$PODCOUNT_PID" 2>/dev/null; then
		step "stopping podcount (pid $PODCOUNT_PID)"
		kill -TERM "$PODCOUNT_PID"
		for _ in $(seq 100); do kill -0 "$PODCOUNT_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$PODCOUNT_PID" 2>/dev/null || true
		wait "$PODCOUNT_PID" 2>/dev/null || true
		tail -n 2 "$LOG" | sed 's/^/    podcount: /'
	fi
	if [[ -f $CP_DIR/pids ]]; then
		step "stopping the control plane (pids $(tr '\n' ' ' <"$CP_DIR/pids"))"
		"$BIN/controlplane" stop -dir "$CP_DIR" || true
	fi
	if [[ $status -ne 0 && -f $LOG ]]; then
		echo "demo $( ((status == 130)) && echo interrupted || echo "failed (exit $status)"); the last lines of podcount's log:" >&2
		tail -n 20 "$LOG" >&2
	fi
	rm -rf "$WORK"
	[[ $status -eq 0 ]] && step "done: everything the demo started is stopped"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# with_progress MESSAGE CMD...: runs CMD, saying every 15 s that it still runs.
with_progress() {
	local msg=$1 start=$SECONDS
	shift
	"$@" &
	local pid=$!
	while ! wait_for "$pid" 15; do echo "    ... still $msg ($((SECONDS - start)) s)"; done
	wait "$pid"
	echo "    $msg: done in $((SECONDS - start)) s"
}

# wait_for PID SECONDS: true once PID has exited, false if it still runs after SECONDS.
wait_for() {
	for _ in $(seq $(($2 * 10))); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
	return 1
}

# free_port: a loopback TCP port nobody listens on.
free_port() {
	local p
	for p in $(seq $((20000 + RANDOM % 20000)) 65000); do
		(: </dev/tcp/127.0.0.1/"$p") 2>/dev/null || { echo "$p"; return; }
	done
}

# converge WANT: prints `kubectl get rs -L pod-count` whenever it changes until
# the labels are WANT ("name=count ..." in name order), or fails after TIMEOUT.
converge() {
	local want=$1 got last= deadline=$((SECONDS + TIMEOUT))
	while :; do
		table=$(kubectl get rs -n "$NS" -L pod-count)
		if [[ $table != "$last" ]]; then
			echo "$table" | sed 's/^/    /'
			echo "    --- ($((SECONDS - deadline + TIMEOUT)) s)"
			last=$table
		fi
		got=$(kubectl get rs -n "$NS" -o go-template='{{range .items}}{{.metadata.name}}={{index .metadata.labels "pod-count"}} {{end}}')
		[[ ${got% } == "$want" ]] && break
		if ((SECONDS > deadline)); then
			echo "labels are '${got% }' after ${TIMEOUT}s, want '$want'" >&2
			return 1
		fi
		sleep 0.2
	done
	echo "    pod-count labels are right: $want. podcount's log since the last step:"
	grep 'msg=labelling' "$LOG" | tail -n +$((SEEN + 1)) |
		sed -E 's/.*msg=labelling controller=podcount namespace=[^ ]+ name=([^ ]+) .*pod-count=([0-9]+).*/      labelling \1 pod-count=\2/'
	SEEN=$(grep -c 'msg=labelling' "$LOG")
}
SEEN=0 # podcount's log lines shown so far

# pods RS NAME...: creates Pods owned by ReplicaSet RS, as its controller would
# (there is no controller-manager in the local control plane).
pods() {
	local rs=$1 uid
	shift
	uid=$(kubectl get rs -n "$NS" "$rs" -o jsonpath='{.metadata.uid}')
	for name in "$@"; do
		kubectl apply -n "$NS" -f - <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $name
  labels: {app: $rs}
  ownerReferences:
  - {apiVersion: apps/v1, kind: ReplicaSet, name: $rs, uid: "$uid", controller: true, blockOwnerDeletion: true}
spec:
  containers: [{name: app, image: registry.example/$rs:1}]
EOF
	done
}

step "1/8 building the control plane runner and its binaries (etcd, kube-apiserver, kubectl; first time ~6 min)"
with_progress "building hack/controlplane" go build -o "$BIN/controlplane" ./hack/controlplane
CP_BIN=$("$BIN/controlplane" build) # prints its progress every 10 s on stderr, the folder on stdout; quick when built

step "2/8 starting the control plane in $CP_DIR"
"$BIN/controlplane" start -dir "$CP_DIR"
kubectl version | sed 's/^/    /'

step "3/8 building example/podcount (first time: ~1 min)"
with_progress "building example/podcount" go build -o "$BIN/podcount" ./example/podcount

METRICS=127.0.0.1:$(free_port)
HEALTH=127.0.0.1:$(free_port)
step "4/8 running podcount in the background (metrics $METRICS, probes $HEALTH, log $LOG)"
"$BIN/podcount" --kubeconfig "$CP_DIR/kubeconfig" --metrics-bind-address "$METRICS" --health-probe-bind-address "$HEALTH" >"$LOG" 2>&1 &
PODCOUNT_PID=$!
echo "    pid $PODCOUNT_PID"
deadline=$((SECONDS + TIMEOUT))
until curl -fsS "http://$HEALTH/readyz" >/dev/null 2>&1; do
	kill -0 "$PODCOUNT_PID" 2>/dev/null || { echo "podcount exited" >&2; exit 1; }
	((SECONDS < deadline)) || { echo "podcount not ready after ${TIMEOUT}s" >&2; exit 1; }
	sleep 0.2
done
echo "    GET /readyz: $(curl -fsS "http://$HEALTH/readyz")"

step "5/8 creating namespace $NS and ReplicaSets web and db (nothing creates their Pods: no controller-manager)"
kubectl create namespace "$NS"
for rs in web db; do
	kubectl apply -n "$NS" -f - <<EOF
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: $rs}
spec:
  replicas: 3
  selector: {matchLabels: {app: $rs}}
  template:
    metadata: {labels: {app: $rs}}
    spec: {containers: [{name: app, image: registry.example/$rs:1}]}
EOF
done
converge "db=0 web=0"

step "6/8 creating Pods owned by them: web-0 web-1 web-2, db-0"
pods web web-0 web-1 web-2
pods db db-0
converge "db=1 web=3"

step "7/8 changing the Pods: deleting web-1, adding db-1 and db-2"
kubectl delete pod -n "$NS" web-1 --wait=false
pods db db-1 db-2
converge "db=3 web=2"

step "8/8 podcount's metrics (GET /metrics)"
curl -fsS "http://$METRICS/metrics" | grep -E '^controller_runtime_reconcile_total|^workqueue_adds_total|^kctl_cache_objects' | sed 's/^/    /'
