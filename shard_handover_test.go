package kctl

import (
	"testing"

	"github.com/kctl-dev/kctl/internal/handover"
	"github.com/kctl-dev/kctl/internal/podfixture"
	"github.com/kctl-dev/kctl/internal/shardhash"
)

// shardReplica is a member of a group and its handover, driven by hand.
type shardReplica struct {
	m *shardMembers
	h *handover.Member
}

// round is one look and write of a replica: drains end at once.
func (r *shardReplica) round(t *testing.T) {
	t.Helper()
	view, err := r.m.live(t.Context())
	if err != nil {
		t.Fatalf("%s: live: %v", r.m.cfg.Identity, err)
	}
	owners := shardhash.AssignWeighted(view.members, namespaceWeights(r.m.cfg.Ranges))
	_, drain := r.h.Look(owners, view.taken)
	for _, rg := range drain {
		r.h.Drained(rg)
	}
	if err := r.m.renew(t.Context(), r.h.Recorded()); err != nil {
		t.Fatalf("%s: renew: %v", r.m.cfg.Identity, err)
	}
}

// namespaceWeights is the weights of n ranges holding 300 namespaces
// named as clusters name them.
func namespaceWeights(n int) []int {
	w := make([]int, n)
	for _, ns := range podfixture.Namespaces(300) {
		w[shardhash.Bucket(ns, n)]++
	}
	return w
}

// checkShards fails t if two replicas serve one range, and reports how
// many ranges are served.
func checkShards(t *testing.T, rs ...*shardReplica) int {
	t.Helper()
	served := map[int]string{}
	for _, r := range rs {
		for rg := range r.m.cfg.Ranges {
			st := r.h.State(rg)
			if st != handover.Serving && st != handover.Draining {
				continue
			}
			if other, ok := served[rg]; ok {
				t.Fatalf("range %d served by %s and %s", rg, other, r.m.cfg.Identity)
			}
			served[rg] = r.m.cfg.Identity
		}
	}
	return len(served)
}

// Members on the real server pass ranges by the handover rule: one member
// serves all, a second joins and takes its share only after the first
// released it, a graceful leave hands everything back; no range is ever
// served twice, and each settles within a few rounds.
func TestShardHandover_JoinAndLeave_OnTheServer(t *testing.T) {
	ns := testNamespace(t, testConfig(t))
	newReplica := func(id string) *shardReplica {
		m, _ := testMember(t, ns, "g", id)
		mustJoin(t, m)
		return &shardReplica{m: m, h: handover.New(id, m.cfg.Ranges)}
	}
	a := newReplica("a")
	settle := func(want int, rs ...*shardReplica) {
		t.Helper()
		for i := range 6 {
			for _, r := range rs {
				r.round(t)
				checkShards(t, rs...)
			}
			if checkShards(t, rs...) == want && i > 0 {
				return
			}
		}
		t.Fatalf("after 6 rounds %d of %d ranges served", checkShards(t, rs...), want)
	}
	settle(64, a)
	b := newReplica("b")
	settle(64, a, b)
	owners := shardhash.AssignWeighted([]string{"a", "b"}, namespaceWeights(64))
	for rg, o := range owners {
		r := map[string]*shardReplica{"a": a, "b": b}[o]
		if r.h.State(rg) != handover.Serving {
			t.Fatalf("range %d: its owner %s has it %v", rg, o, r.h.State(rg))
		}
	}
	if err := b.m.leave(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.h.Lost() // a replica that left serves nothing
	settle(64, a)
}
