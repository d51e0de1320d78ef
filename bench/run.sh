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
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/bin .cache/bin
go build -o .cache/bin/controlplane ./hack/controlplane
(cd bench && go build -o bin/benchrun ./cmd/benchrun)
exec .cache/bin/controlplane run -- bench/bin/benchrun all -bench-dir bench -out bench/bin/results.md "$@"
