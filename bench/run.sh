#!/usr/bin/env bash
# Runs every benchmark of kctl against controller-runtime and client-go on a
# local control plane (make bench; about 15-20 minutes on 2 cores). Markdown
# goes to stdout and to bench/bin/results.md, progress to stderr, controller
# logs to bench/bin/logs. Extra arguments go to benchrun, e.g.
#   bash bench/run.sh -skip queue -runs 1 -sync-runs 3
#
# -kctl-base DIR adds the stack kctl-base: kctl as checked out in DIR, built by
# DIR's own bench module, to show a change made nothing slower. The sync and
# end-to-end tables then have a row kctl / kctl-base: the ratio of medians,
# then kctl-base's min and max over its median (its runs' spread). E.g.
#   git worktree add --detach /tmp/kctl-base main
#   bash bench/run.sh -skip footprint,rss,queue -stacks kctl,kctl-base \
#     -kctl-base /tmp/kctl-base -runs 7 -sync-runs 7 -default-qps-runs 0
#
# The stack kctl-history is kctl's binary run with --history (the Manager's
# per-key reconcile history on); the end-to-end table then has a row
# kctl-history / kctl with kctl's spread, e.g.
#   bash bench/run.sh -skip footprint,rss,queue,sync -stacks kctl,kctl-history \
#     -runs 7 -default-qps-runs 0
# The history's share of kctl's CPU, from CPU profiles sampled more often
# than Go's 100 Hz (about 100 samples a run), and of its allocation. A
# kernel with CONFIG_HZ=250 delivers at most 250 samples per CPU second
# whatever the rate asked; pprof then labels each sample 1/hz, so its times
# read low by hz/250: use the shares, and /proc's CPU time for seconds.
#   bash bench/run.sh -skip footprint,rss,queue,sync -stacks kctl-history,kctl \
#     -runs 7 -default-qps-runs 0 -cpuprofile-dir /tmp/prof -cpuprofile-hz 1000
#   bench/bin/benchrun prof-share bench/bin/podcount-kctl-history /tmp/prof/e2e-kctl-history-*[0-9].pprof
#   bench/bin/benchrun prof-share -sample-index alloc_space bench/bin/podcount-kctl-history /tmp/prof/e2e-kctl-history-*.allocs.pprof
#
# Where idle RSS goes (file pages of the binary, anonymous memory, the Go
# heap from its GC trace), under runtime settings; BENCH_CMD names a benchrun
# command to run in place of all:
#   BENCH_CMD=rss-probe bash bench/run.sh -runs 5 -probe-variants default,GOGC=50,madvdontneed=0
# The stack kctl-lean is podcount/kctllean: podcount with only the flags and
# metrics server controller-runtime's podcount has, without the --shards,
# --history and --pprof-addr that link more of kctl into podcount/kctl:
#   bash bench/run.sh -skip footprint,e2e,queue,sync -runs 7 -stacks kctl,kctl-lean,controller-runtime
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/bin .cache/bin
go build -o .cache/bin/controlplane ./hack/controlplane
(cd bench && go build -o bin/benchrun ./cmd/benchrun)
exec .cache/bin/controlplane run -- bench/bin/benchrun "${BENCH_CMD:-all}" -bench-dir bench -out bench/bin/results.md "$@"
