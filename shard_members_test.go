package kctl

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
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

func TestShardOptions_Complete(t *testing.T) {
	old := namespaceFile
	t.Cleanup(func() { namespaceFile = old })
	namespaceFile = t.TempDir() + "/absent"
	got, err := ShardOptions{Group: "podcount", Namespace: "ns"}.complete()
	if err != nil {
		t.Fatal(err)
	}
	if got.Ranges != 64 || got.LeaseDuration != 15*time.Second || got.RenewDeadline != 10*time.Second || got.RenewPeriod != 2*time.Second {
		t.Errorf("defaults: %+v", got)
	}
	if got.Identity == "" || got.Identity != strings.ToLower(got.Identity) {
		t.Errorf("default identity %q: want a lowercase name", got.Identity)
	}
	for _, c := range []struct {
		opts ShardOptions
		want string
	}{
		{ShardOptions{Namespace: "ns"}, "ShardOptions.Group is empty"},
		{ShardOptions{Group: "g"}, "set ShardOptions.Namespace"},
		{ShardOptions{Group: "g", Namespace: "ns", Identity: "Web_0"}, "is not a valid name"},
		{ShardOptions{Group: "g/x", Namespace: "ns", Identity: "a"}, "is not a label value"},
		{ShardOptions{Group: "g", Namespace: "ns", Identity: "a", Ranges: 2000}, "give 1 to 1024"},
		{ShardOptions{Group: "g", Namespace: "ns", Identity: "a", LeaseDuration: 5 * time.Second}, "must be greater than RenewDeadline"},
	} {
		_, err := c.opts.complete()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "kctl: ") {
			t.Errorf("%+v.complete() = %v, want an error saying %q", c.opts, err, c.want)
		}
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
