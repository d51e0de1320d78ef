package kctl

// A member's Lease group (shard_members.go) and its state (shard_state.go):
// joining, leaving and expiring Leases, the recorded ranges, a handover on
// the server, a started range served once every informer has listed it,
// and the workers' owns hook.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/handover"
	"github.com/kctl-dev/kctl/internal/podfixture"
	"github.com/kctl-dev/kctl/internal/shardhash"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// shardClock is a fake clock for a member's view: time moves only by add.
type shardClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *shardClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *shardClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testMember is a member of group in ns on the test's control plane, with
// a fake clock of its own.
func testMember(t *testing.T, ns, group, id string) (*shardMembers, *shardClock) {
	t.Helper()
	cfg, err := ShardOptions{Group: group, Namespace: ns, Identity: id,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second,
		RenewPeriod: time.Second}.complete()
	if err != nil {
		t.Fatal(err)
	}
	conn := testProbeConn(t, testConfig(t))
	m := newShardMembers(cfg, NewClient[coordinationv1.Lease](conn))
	clock := &shardClock{t: time.Unix(1e9, 0)}
	m.now = clock.now
	return m, clock
}

func wantLive(t *testing.T, m *shardMembers, want ...string) {
	t.Helper()
	view, err := m.live(t.Context())
	if err != nil {
		t.Fatalf("%s: live() error: %v", m.cfg.Identity, err)
	}
	got := view.members
	if !slices.Equal(got, want) {
		t.Fatalf("%s: live() = %v, want %v", m.cfg.Identity, got, want)
	}
}

func mustJoin(t *testing.T, ms ...*shardMembers) {
	t.Helper()
	for _, m := range ms {
		if err := m.join(t.Context()); err != nil {
			t.Fatalf("%s: join: %v", m.cfg.Identity, err)
		}
	}
}

// Joining members see each other at once; one leaving gracefully is gone
// for the others at their next look, without waiting for its Lease to
// expire; each holds a Lease named <group>-<identity>, labelled with the
// group, and another group's Leases do not count.
func TestShardMembers_JoinAndLeave_SeenAtTheNextLook(t *testing.T) {
	ns := testNamespace(t, testConfig(t))
	a, _ := testMember(t, ns, "podcount", "a")
	b, _ := testMember(t, ns, "podcount", "b")
	c, _ := testMember(t, ns, "podcount", "c")
	other, _ := testMember(t, ns, "other", "x")
	mustJoin(t, a, b)
	wantLive(t, a, "a", "b")
	mustJoin(t, c, other)
	wantLive(t, a, "a", "b", "c")
	wantLive(t, c, "a", "b", "c")
	wantLive(t, other, "x")

	l, err := a.store.Get(t.Context(), ns, "podcount-b")
	if err != nil {
		t.Fatalf("b's Lease: %v", err)
	}
	if l.Labels[ShardGroupLabel] != "podcount" || *l.Spec.HolderIdentity != "b" || *l.Spec.LeaseDurationSeconds != 3 {
		t.Fatalf("b's Lease: labels %v, holder %q, duration %d", l.Labels, *l.Spec.HolderIdentity, *l.Spec.LeaseDurationSeconds)
	}

	if err := b.leave(t.Context()); err != nil {
		t.Fatalf("b: leave: %v", err)
	}
	wantLive(t, a, "a", "c")
	wantLive(t, c, "a", "c")
	if _, err := a.store.Get(t.Context(), ns, "podcount-b"); err == nil {
		t.Fatal("b's Lease is still there after leave")
	}
}

// A member's Lease unrenewed for its duration, by the looking member's own
// clock, is no longer live, and the looking member deletes it; a renewal
// within the duration keeps it live. The expired member learns at its next
// renewal that it lost its Lease.
func TestShardMembers_UnrenewedLease_ExpiresAfterItsDuration(t *testing.T) {
	ns := testNamespace(t, testConfig(t))
	a, clock := testMember(t, ns, "g", "a")
	b, bClock := testMember(t, ns, "g", "b")
	mustJoin(t, a, b)
	wantLive(t, a, "a", "b")

	clock.add(3*time.Second - time.Millisecond)
	bClock.add(time.Second) // a renewal writes b's time: a new version
	wantLive(t, a, "a", "b")
	if err := b.renew(t.Context(), nil); err != nil {
		t.Fatalf("b: renew: %v", err)
	}
	if err := a.renew(t.Context(), nil); err != nil {
		t.Fatalf("a: renew: %v", err)
	}
	wantLive(t, a, "a", "b") // b's new version: its duration starts again
	clock.add(3*time.Second - time.Millisecond)
	wantLive(t, a, "a", "b")
	clock.add(time.Millisecond)
	wantLive(t, a, "a")
	if _, err := a.store.Get(t.Context(), ns, "g-b"); err == nil {
		t.Fatal("b's expired Lease was not deleted")
	}
	err := b.renew(t.Context(), nil)
	if !errors.Is(err, errShardLeaseLost) {
		t.Fatalf("b: renew after expiry: %v, want errShardLeaseLost", err)
	}
}

// A member whose Lease a peer deleted learns it at its next look.
func TestShardMembers_LeaseDeletedByAPeer_LostAtTheNextLook(t *testing.T) {
	ns := testNamespace(t, testConfig(t))
	a, _ := testMember(t, ns, "g", "a")
	mustJoin(t, a)
	if err := a.store.DeleteWithOptions(t.Context(), ns, "g-a", DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.live(t.Context()); !errors.Is(err, errShardLeaseLost) {
		t.Fatalf("live() after the Lease was deleted: %v, want errShardLeaseLost", err)
	}
}

// A replica restarted with the same identity takes over its Lease; the old
// process, should it still run, loses it at its next renewal.
func TestShardMembers_RejoinSameIdentity_TakesOverItsLease(t *testing.T) {
	ns := testNamespace(t, testConfig(t))
	old, _ := testMember(t, ns, "g", "web-0")
	restarted, clock := testMember(t, ns, "g", "web-0")
	clock.add(time.Minute) // restarted later: it writes other times
	mustJoin(t, old, restarted)
	wantLive(t, restarted, "web-0")
	err := old.renew(t.Context(), nil)
	if !errors.Is(err, errShardLeaseLost) {
		t.Fatalf("the old process's renew: %v, want errShardLeaseLost", err)
	}
	if err := restarted.renew(t.Context(), nil); err != nil {
		t.Fatalf("the restarted process's renew: %v", err)
	}
}

// A replica without rights on Leases gets an error naming them.
func TestShardMembers_Forbidden_ErrorNamesThePermissions(t *testing.T) {
	cfg, err := ShardOptions{Group: "g", Namespace: "default", Identity: "a"}.complete()
	if err != nil {
		t.Fatal(err)
	}
	conn := testProbeConn(t, testUnprivilegedConfig(t))
	m := newShardMembers(cfg, NewClient[coordinationv1.Lease](conn))
	err = m.join(t.Context())
	if err == nil || !strings.Contains(err.Error(), "get, list, create, update and delete on leases.coordination.k8s.io in namespace default") {
		t.Fatalf("join without rights: %v", err)
	}
}

// A member's Lease records the ranges it holds; its peers see them taken
// while it is live, not once it expired; a record nobody can read blocks
// every range.
func TestShardMembers_RecordedRanges_TakenWhileLive(t *testing.T) {
	ns := testNamespace(t, testConfig(t))
	a, _ := testMember(t, ns, "g", "a")
	b, bClock := testMember(t, ns, "g", "b")
	mustJoin(t, a, b)
	if err := a.renew(t.Context(), []int{1, 3}); err != nil {
		t.Fatal(err)
	}
	view, err := b.live(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for r, taken := range view.taken {
		if taken != (r == 1 || r == 3) {
			t.Fatalf("b sees range %d taken: %v; a records 1 and 3", r, taken)
		}
	}
	if err := b.renew(t.Context(), []int{5}); err != nil {
		t.Fatal(err)
	}
	aView, err := a.live(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !aView.taken[5] || aView.taken[1] {
		t.Fatalf("a sees taken %v; want b's 5, not its own 1", aView.taken)
	}

	l, err := a.store.Get(t.Context(), ns, "g-a")
	if err != nil {
		t.Fatal(err)
	}
	l.Annotations[shardRangesAnnotation] = "1,x"
	if err := a.store.Update(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	view, err = b.live(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(view.taken, false) {
		t.Fatalf("an unreadable record: b sees taken %v; want every range", view.taken)
	}
	bClock.add(3 * time.Second)
	view, err = b.live(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(view.taken, true) || !slices.Equal(view.members, []string{"b"}) {
		t.Fatalf("after a expired: members %v, taken %v; want b alone, nothing taken", view.members, view.taken)
	}
}

// nextExpiry is when a peer's Lease, live at the last list, expires by
// this member's clock: LeaseDuration after it first saw the Lease's
// current version. An expiry that passed after the last list is still
// returned (a look must judge it at once); once a list has judged the
// Lease expired it is not; the member's own Lease never counts.
func TestShardMembers_NextExpiry_FirstPeerLeaseNotYetJudged(t *testing.T) {
	ns := testNamespace(t, testConfig(t))
	a, clock := testMember(t, ns, "g", "a")
	b, bClock := testMember(t, ns, "g", "b")
	mustJoin(t, a)
	wantLive(t, a, "a")
	if got := a.nextExpiry(); !got.IsZero() {
		t.Fatalf("alone: nextExpiry() = %v, want zero", got)
	}
	mustJoin(t, b)
	wantLive(t, a, "a", "b")
	first := clock.now()
	if got, want := a.nextExpiry(), first.Add(3*time.Second); !got.Equal(want) {
		t.Fatalf("nextExpiry() = %v, want the first sight of b's Lease + 3s = %v", got, want)
	}

	clock.add(time.Second)
	bClock.add(time.Second)
	if err := b.renew(t.Context(), nil); err != nil {
		t.Fatalf("b: renew: %v", err)
	}
	wantLive(t, a, "a", "b")
	renewed := clock.now()
	if got, want := a.nextExpiry(), renewed.Add(3*time.Second); !got.Equal(want) {
		t.Fatalf("after b renewed: nextExpiry() = %v, want %v", got, want)
	}

	clock.add(4 * time.Second) // past the expiry, not listed since
	if got, want := a.nextExpiry(), renewed.Add(3*time.Second); !got.Equal(want) {
		t.Fatalf("expiry passed, not judged: nextExpiry() = %v, want %v", got, want)
	}
	wantLive(t, a, "a")
	if got := a.nextExpiry(); !got.IsZero() {
		t.Fatalf("b judged expired: nextExpiry() = %v, want zero", got)
	}
}

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

// slowLister is a sharded informer whose list with the new selector has
// not come back until listed is set.
type slowLister struct {
	res    Resource
	listed atomic.Bool
}

func (f *slowLister) resource() Resource      { return f.res }
func (f *slowLister) setShard(string)         {}
func (f *slowLister) reshard()                {}
func (f *slowLister) listedWith(string) bool  { return f.listed.Load() }
func (f *slowLister) heldRanges(n int) []bool { return make([]bool, n) }

// keyInRange is a key whose namespace falls in range r of ranges.
func keyInRange(r, ranges int) Key {
	for i := 0; ; i++ {
		ns := fmt.Sprintf("ns-%d", i)
		if shardhash.Bucket(ns, ranges) == r {
			return Key{ns, "x"}
		}
	}
}

// A range that starts is served (its keys reconciled) only once every
// sharded informer holds a list made with the selector that takes it
// in: with a ReplicaSet's Pods still being listed, a reconcile of the
// ReplicaSet would count none. Seen in runShardGroup with whole Pods:
// at a handover the ReplicaSets' relist came back before the Pods', and
// 34 reconciles counted 0 Pods.
func TestShardRun_StartedRange_ServedOnceEveryInformerListed(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	run, err := mgr.shard(ShardOptions{Group: "listed", Namespace: ns, Identity: "m-0", Ranges: 8})
	if err != nil {
		t.Fatal(err)
	}
	slow := &slowLister{res: testResource[corev1.Pod](t)}
	run.informers = append(run.informers, slow)
	run.served[slow.res] = true
	k := keyInRange(3, 8)

	run.act([]int{3}, nil)
	if run.owns(k) {
		t.Fatalf("range 3 is served while the Pods' informer has not listed it")
	}
	run.serveListed()
	if run.owns(k) {
		t.Fatalf("range 3 is served while the Pods' informer has not listed it")
	}
	slow.listed.Store(true)
	run.serveListed()
	if !run.owns(k) {
		t.Fatalf("range 3 is not served once every informer listed it")
	}

	// A range drained before it was served is not served later.
	slow.listed.Store(false)
	run.act([]int{5}, nil)
	run.act(nil, []int{5})
	slow.listed.Store(true)
	run.serveListed()
	if run.owns(keyInRange(5, 8)) {
		t.Errorf("range 5, drained while starting, is served")
	}
	if !run.owns(k) {
		t.Errorf("range 3 is no longer served")
	}
}

// ownsFunc is a keyOwner for tests: a member that owns the keys the func
// says, and never loses its Lease.
type ownsFunc func(k Key) bool

func (f ownsFunc) owns(k Key) bool                           { return f(k) }
func (ownsFunc) leaseOf(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// With the Manager's member hook set (as Shard sets it), a controller runs
// without leading, reconciles only the keys the hook owns, skips the
// others (counted on the metrics page), reports an owned key in flight
// (inFlight) while its reconcile runs, and on replayKeys reconciles the
// cached keys it owns from then on.
func TestShardWorker_OwnsHook_SkipsKeysNotOwnedAndReportsInFlight(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	var mine sync.Map // name -> true: owned
	mine.Store("a", true)
	mgr.member = ownsFunc(func(k Key) bool {
		_, ok := mine.Load(k.Name)
		return ok
	})
	release := make(chan struct{})
	var mu sync.Mutex
	seen := map[string]int{}
	c := NewController(mgr, "owned-keys", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		mu.Lock()
		seen[cm.Name]++
		mu.Unlock()
		if cm.Name == "a" {
			<-release
		}
		return Result{}, nil
	})
	c.MaxConcurrentReconciles(2) // b is taken while a runs
	var released atomic.Bool
	defer func() {
		if !released.Load() {
			close(release)
		}
	}()
	startManager(t, mgr)
	cms := ClientFor[corev1.ConfigMap](mgr)
	for _, name := range []string{"a", "b"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := cms.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
	}
	named := mgr.byName["owned-keys"].(shardedController)
	isA := func(k Key) bool { return k.Name == "a" }
	eventually(t, "a in flight", func() bool { return named.inFlight(isA) })
	eventually(t, "b skipped", func() bool {
		page := scrapeMetrics(t, mgr.metrics.Handler())
		return strings.Contains(page, `kctl_shard_keys_skipped_total{controller="owned-keys"} 1`)
	})
	released.Store(true)
	close(release)
	eventually(t, "a done", func() bool { return !named.inFlight(isA) })
	mu.Lock()
	if seen["b"] != 0 {
		t.Errorf("b, not owned, was reconciled %d times", seen["b"])
	}
	mu.Unlock()
	mine.Store("b", true)
	named.replayKeys(func(k Key) bool { return k.Name == "b" })
	eventually(t, "b reconciled once owned", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["b"] == 1
	})
}
