package kctl

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/podfixture"
	"github.com/kctl-dev/kctl/internal/shardhash"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The timings of the shard group tests: short, so that handovers take
// about a second, with a RenewDeadline (3/4 of the Lease) that a loaded
// 2-core machine running other packages' tests still meets.
const (
	testShardLease  = 3 * time.Second
	testShardRenew  = 300 * time.Millisecond
	testShardRanges = 64
)

// shardSpan is one reconcile: by which member, of which key, when.
type shardSpan struct {
	member     string
	key        Key
	start, end time.Time
}

// shardLog records every reconcile of every member.
type shardLog struct {
	mu    sync.Mutex
	spans []shardSpan
}

// reconcile is member's reconcile function: it records its span, and
// works for 2 ms (or until its context ends) so that overlaps would show.
func (l *shardLog) reconcile(member string) func(context.Context, *appsv1.ReplicaSet) (Result, error) {
	return func(ctx context.Context, rs *appsv1.ReplicaSet) (Result, error) {
		sp := shardSpan{member: member, key: Key{rs.Namespace, rs.Name}, start: time.Now()}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Millisecond): // the reconcile's work
		}
		sp.end = time.Now()
		l.mu.Lock()
		l.spans = append(l.spans, sp)
		l.mu.Unlock()
		return Result{}, nil
	}
}

// since returns, by key, the members that reconciled it starting at or
// after t.
func (l *shardLog) since(t time.Time) map[Key][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[Key][]string{}
	for _, sp := range l.spans {
		if !sp.start.Before(t) {
			out[sp.key] = append(out[sp.key], sp.member)
		}
	}
	return out
}

// overlaps lists every pair of reconciles of one key by two members at
// overlapping times.
func (l *shardLog) overlaps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	byKey := map[Key][]shardSpan{}
	for _, sp := range l.spans {
		byKey[sp.key] = append(byKey[sp.key], sp)
	}
	var bad []string
	for k, sps := range byKey {
		for i, a := range sps {
			for _, b := range sps[i+1:] {
				if a.member != b.member && a.start.Before(b.end) && b.start.Before(a.end) {
					bad = append(bad, fmt.Sprintf("%s: %s [%v, %v] and %s [%v, %v]", k,
						a.member, a.start.Format(time.StampMicro), a.end.Format(time.StampMicro),
						b.member, b.start.Format(time.StampMicro), b.end.Format(time.StampMicro)))
				}
			}
		}
	}
	return bad
}

// shardMember is one member of the test's group: a Manager with its own
// Conn, running.
type shardMember struct {
	id     string
	mgr    *Manager
	run    *shardRun
	rsets  *Informer[appsv1.ReplicaSet]
	cancel context.CancelCauseFunc
	done   chan error
}

// startShardMember starts member id of group "podcount" (Leases in
// leaseNS), reconciling ReplicaSets into log.
func startShardMember(t *testing.T, cfg *rest.Config, leaseNS, id string, log *shardLog) *shardMember {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("member", id)
	mgr, err := NewManager(Options{Config: cfg, Logger: logger, ShutdownTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	NewController(mgr, "podcount", log.reconcile(id)).MaxConcurrentReconciles(4)
	run, err := mgr.shard(ShardOptions{
		Group: "podcount", Namespace: leaseNS, Identity: id, Ranges: testShardRanges,
		LeaseDuration: testShardLease, RenewDeadline: 3 * testShardLease / 4, RenewPeriod: testShardRenew,
	})
	if err != nil {
		t.Fatal(err)
	}
	rsets, err := InformerFor[appsv1.ReplicaSet](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	m := &shardMember{id: id, mgr: mgr, run: run, rsets: rsets, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { m.stop(t, nil) })
	return m
}

// stop cancels the member with cause (nil: a graceful stop) and waits
// for Start to return; a second call does nothing.
func (m *shardMember) stop(t *testing.T, cause error) error {
	t.Helper()
	if m.done == nil {
		return nil
	}
	m.cancel(cause)
	var err error
	select {
	case err = <-m.done:
	case <-time.After(30 * time.Second):
		t.Errorf("member %s: Start did not return 30s after its context ended", m.id)
	}
	m.done = nil
	return err
}

// serves reports whether m serves exactly the ranges owners gives it and
// drains none.
func (m *shardMember) serves(owners []string) bool {
	m.run.mu.RLock()
	defer m.run.mu.RUnlock()
	if m.run.releasing > 0 {
		return false
	}
	for r, o := range owners {
		if m.run.serving[r] != (o == m.id) {
			return false
		}
	}
	return true
}

// readyz is m's /readyz?verbose answer.
func (m *shardMember) readyz() string {
	rec := httptest.NewRecorder()
	m.mgr.health.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz?verbose", nil))
	return rec.Body.String()
}

// shardFixture creates the namespaces (kept if they exist: namespaces
// are never deleted on a test control plane) and perNS ReplicaSets named
// rs-<run>-<j> in each, and returns their keys.
func shardFixture(t *testing.T, cfg *rest.Config, nss []string, perNS int) []Key {
	t.Helper()
	conn := testProbeConn(t, cfg)
	namespaces := NewClient[corev1.Namespace](conn)
	rsets := NewClient[appsv1.ReplicaSet](conn)
	run := strings.ToLower(randomSuffix())
	var keys []Key
	for _, ns := range nss {
		err := namespaces.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		for j := range perNS {
			rs := testReplicaSet(ns, fmt.Sprintf("rs-%s-%d", run, j))
			if err := rsets.Create(t.Context(), rs); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, Key{ns, rs.Name})
		}
	}
	return keys
}

// randomSuffix is 6 random letters and digits.
func randomSuffix() string { return newID()[:6] }

// bump changes an annotation of every key's ReplicaSet, so that each is
// reconciled again.
func bump(t *testing.T, cfg *rest.Config, keys []Key, value string) {
	t.Helper()
	rsets := NewClient[appsv1.ReplicaSet](testProbeConn(t, cfg))
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"bump":%q}}}`, value))
	for _, k := range keys {
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
		if err := rsets.Patch(t.Context(), rs, MergePatch, patch, PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// expectedOwner is the member that owns k's namespace by owners.
func expectedOwner(owners []string, k Key) string {
	return owners[shardhash.Bucket(k.Namespace, testShardRanges)]
}

// checkReconciledBy bumps every key and checks that each is then
// reconciled, only by the member that owns it by owners; it returns how
// many keys each member reconciled.
func checkReconciledBy(t *testing.T, cfg *rest.Config, log *shardLog, keys []Key, owners []string, round string) map[string]int {
	t.Helper()
	t0 := time.Now()
	bump(t, cfg, keys, round)
	eventually(t, "every ReplicaSet reconciled after bump "+round, func() bool {
		got := log.since(t0)
		return !slices.ContainsFunc(keys, func(k Key) bool { return len(got[k]) == 0 })
	})
	per := map[string]int{}
	for k, by := range log.since(t0) {
		if !slices.Contains(keys, k) {
			continue
		}
		want := expectedOwner(owners, k)
		for _, m := range slices.Compact(slices.Sorted(slices.Values(by))) {
			if m != want {
				t.Errorf("round %s: %s reconciled by %s, owned by %s", round, k, m, want)
			}
			per[m]++
		}
	}
	return per
}

// checkNamespaceBalance checks that each member of ids holds the mean
// number of namespaces (by weights) to within one range's weight or
// 10 %, whichever is more: what shardhash.AssignWeighted guarantees.
func checkNamespaceBalance(t *testing.T, weights []int, owners, ids []string) {
	t.Helper()
	total := 0
	held := map[string]int{}
	for r, x := range weights {
		total += x
		held[owners[r]] += x
	}
	mean := total / len(ids)
	slack := max(slices.Max(weights), total/10/len(ids))
	t.Logf("namespaces held of %d: %v (mean %d, slack %d)", total, held, mean, slack)
	for _, id := range ids {
		if held[id] < mean-slack || held[id] > mean+slack+1 {
			t.Errorf("%s holds %d namespaces of %d, want %d ± %d", id, held[id], total, mean, slack)
		}
	}
}

// waitServing waits until the members of ms agree on the weights of the
// ranges (their Namespace informers caught up), each serves exactly its
// ranges among the ids of ms by them, and none drains; it returns the
// owners.
func waitServing(t *testing.T, ms []*shardMember) []string {
	t.Helper()
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.id)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		w := ms[0].run.weights()
		owners := shardhash.AssignWeighted(ids, w)
		agree := !slices.ContainsFunc(ms, func(m *shardMember) bool { return !slices.Equal(m.run.weights(), w) })
		if agree && !slices.ContainsFunc(ms, func(m *shardMember) bool { return !m.serves(owners) }) {
			return owners
		}
		if time.Now().After(deadline) {
			t.Fatalf("members %v did not settle on their ranges within 60s", ids)
		}
		time.Sleep(20 * time.Millisecond) // a poll, bounded by the deadline
	}
}

// runShardGroup is the test of a group of 3 members on cfg's server:
// serverSide says whether it serves the shard selector.
func runShardGroup(t *testing.T, cfg *rest.Config, serverSide bool) {
	leaseNS := testNamespace(t, cfg)
	nss := podfixture.Namespaces(300)
	keys := shardFixture(t, cfg, nss, 2)
	log := &shardLog{}
	ids := []string{"m-0", "m-1", "m-2"}
	var ms []*shardMember
	for _, id := range ids {
		ms = append(ms, startShardMember(t, cfg, leaseNS, id, log))
	}
	settled := time.Now()
	owners := waitServing(t, ms)
	t.Logf("3 members settled on their ranges in %v", time.Since(settled).Round(time.Millisecond))

	per := checkReconciledBy(t, cfg, log, keys, owners, "3-members")
	t.Logf("3 members, %d ReplicaSets in %d namespaces: reconciled %v (ideal %d each)", len(keys), len(nss), per, len(keys)/3)
	checkNamespaceBalance(t, ms[0].run.weights(), owners, ids)
	// The assignment balances every namespace of the cluster; the
	// fixture's are a sample of them where others abound (the plain
	// control plane keeps every test's namespace): 10 % only where the
	// fixture's namespaces are nearly all of them.
	total := 0
	for _, x := range ms[0].run.weights() {
		total += x
	}
	bound := 10
	if len(nss)*10 < total*9 {
		bound = 25
	}
	t.Logf("the fixture's %d namespaces of the %d the members see: bound %d %%", len(nss), total, bound)
	for _, id := range ids {
		n := per[id]
		if n*300 < len(keys)*(100-bound) || n*300 > len(keys)*(100+bound) {
			t.Errorf("%s reconciled %d of %d, want within %d %% of a third", id, n, len(keys), bound)
		}
	}
	ours := map[Key]bool{}
	for _, k := range keys {
		ours[k] = true
	}
	for _, m := range ms {
		want := 0
		if serverSide {
			for _, k := range keys {
				if expectedOwner(owners, k) == m.id {
					want++
				}
			}
		} else {
			want = len(keys)
		}
		eventually(t, m.id+"'s cache holds its share", func() bool {
			objs, _ := m.rsets.List(ListOptions{})
			n := 0
			for _, o := range objs {
				if ours[Key{o.Namespace, o.Name}] {
					n++
				}
			}
			return n == want
		})
		t.Logf("%s caches %d of the %d ReplicaSets", m.id, want, len(keys))
		mode := "server-side selector"
		if !serverSide {
			mode = "memory not split"
		}
		page := scrapeMetrics(t, m.mgr.metrics.Handler())
		owned := fmt.Sprintf(`kctl_shard_ranges_owned{group="podcount"} %d`+"\n", len(shardhash.Owned(owners, m.id)))
		for _, want := range []string{`kctl_shard_members{group="podcount"} 3`, owned, `kctl_shard_handovers_total{group="podcount"} `} {
			if !strings.Contains(page, want) {
				t.Errorf("%s's metrics page lacks %s", m.id, want)
			}
		}
		ready := m.readyz()
		if !strings.Contains(ready, "[+]shard ok (group podcount, 3 members, ") || !strings.Contains(ready, mode) {
			t.Errorf("%s /readyz?verbose:\n%s\nwant a shard line with 3 members and %q", m.id, ready, mode)
		}
	}

	// A graceful stop: the Lease is deleted, the others take over at once.
	stopped := time.Now()
	if err := ms[2].stop(t, nil); err != nil {
		t.Errorf("m-2 stopped with %v", err)
	}
	owners = waitServing(t, ms[:2])
	t.Logf("after m-2 stopped gracefully, the others served its ranges in %v", time.Since(stopped).Round(time.Millisecond))
	per = checkReconciledBy(t, cfg, log, keys, owners, "2-members")
	t.Logf("2 members: reconciled %v", per)

	// An abrupt stop: the Lease stays until it expires.
	ms[1].run.keepLease.Store(true)
	killed := time.Now()
	ms[1].stop(t, fmt.Errorf("killed: %w", ErrLeaderLost))
	owners = waitServing(t, ms[:1])
	took := time.Since(killed)
	t.Logf("after m-1 was killed, m-0 served its ranges in %v (LeaseDuration %v, RenewPeriod %v)", took.Round(time.Millisecond), testShardLease, testShardRenew)
	// The peer first sees the last renewal up to one period after it,
	// and judges it expired at a look up to one period after its
	// LeaseDuration; claim and serve then follow at once (hurried).
	// Half a second more for a loaded machine.
	limit := testShardLease + 2*testShardRenew + 500*time.Millisecond
	if took > limit {
		t.Errorf("m-0 served m-1's ranges %v after the kill, want at most %v", took, limit)
	}
	checkReconciledBy(t, cfg, log, keys, owners, "1-member")

	if bad := log.overlaps(); len(bad) > 0 {
		t.Errorf("%d keys reconciled by two members at once:\n%s", len(bad), strings.Join(bad[:min(len(bad), 10)], "\n"))
	}
}

// 3 members on the server with the feature gate ShardedListAndWatch:
// every ReplicaSet is reconciled, each member reconciles and caches the
// namespaces of its ranges only (about a third), no key is reconciled by
// two members at once, and after a graceful stop and a kill the others
// take the ranges over and reconcile every object.
func TestShardGroup_ThreeMembers_ServerSideSelector(t *testing.T) {
	runShardGroup(t, testShardedConfig(t), true)
}

// The same on the default server, without the gate: the caches hold
// everything (the selector is ignored), the reconciles are still split,
// and /readyz says the memory is not split.
func TestShardGroup_ThreeMembers_GateOff_FilterOnly(t *testing.T) {
	runShardGroup(t, testConfig(t), false)
}
