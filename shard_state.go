package kctl

// An extra (sharding): a member's state (shardRun): which ranges it
// serves and holds, read by the workers (owns), the informers (the
// selector) and /readyz; and how ranges change hands at each look: act
// starts and begins drains, drainStep ends them. The loop that drives it
// is in shard_run.go.

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kctl-dev/kctl/internal/handover"
	"github.com/kctl-dev/kctl/internal/metrics"
	"github.com/kctl-dev/kctl/internal/shardhash"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// shardRun is one member of a shard group, running with its Manager.
//
// The run loop's goroutine alone uses hand, members, served, draining,
// starting, renewed, recorded, released and lastMembers. mu guards the
// rest.
// Invariants: serving[r] implies held[r]; serving[r] only while hand
// says Serving, and once every sharded informer has listed with a
// selector that takes r in (starting[r] until then); held[r] from
// Serving until a drain's in-flight reconciles are done; selector names
// the namespaces of the held ranges (shardhash.NothingSelected if none), which
// are selected, and is every sharded informer's once updateSelector
// returns (setShard); listed holds the namespaces of a selector that every
// sharded informer has listed with since. mu is never held while an
// informer's lock is wanted, but by informerMade, for a new informer.
type shardRun struct {
	m          *Manager
	cfg        ShardOptions // completed
	members    *shardMembers
	hand       *handover.Member
	log        *slog.Logger
	series     *metrics.Shard
	namespaces *Informer[metav1.PartialObjectMetadata]
	// wake is signalled when a namespace is added or deleted.
	wake chan struct{}
	// served tells, by resource, whether the server honours the
	// selector (probed once); a probe that failed is retried.
	served map[Resource]bool
	// draining holds each range being drained.
	draining map[int]*drainState
	// starting[r]: r is held, not yet served: an informer has not
	// listed its objects yet (serveListed).
	starting []bool
	// renewed is the start of the last successful renewal.
	renewed time.Time
	// lost ends when loseWork (both set by Manager.Shard, before run)
	// is called: it cancels the in-flight reconciles of every
	// controller (leaseOf) with its cause: the Lease is lost or no
	// longer renewed in time, so peers may take the ranges.
	lost     context.Context
	loseWork context.CancelCauseFunc
	// recorded: the last renewal wrote hand.Recorded(); a Look is
	// made only then (handover's rule).
	recorded bool
	// released: a range was released since the last renewal.
	released bool
	// lastMembers: the live members at the last look.
	lastMembers []string
	// keepLease (tests) makes a stop leave the Lease to expire, as a
	// killed process does.
	keepLease atomic.Bool

	mu        sync.RWMutex
	serving   []bool
	held      []bool
	selector  string
	selected  map[string]bool
	listed    map[string]bool
	informers []shardable
	// releasing is len(draining), for tests and /readyz.
	releasing int
	// looked: joined and looked at the group at least once.
	looked bool
	live   int    // members seen at the last look
	mode   string // how the caches are split, for /readyz
}

// drainState is one range being drained: since when, and whether its
// in-flight reconciles are done and its objects are being dropped.
type drainState struct {
	since    time.Time
	dropping bool
}

// newShardRun makes the member of cfg (completed) for m.
func newShardRun(m *Manager, cfg ShardOptions, store memberStore) *shardRun {
	return &shardRun{
		m:        m,
		cfg:      cfg,
		members:  newShardMembers(cfg, store),
		hand:     handover.New(cfg.Identity, cfg.Ranges),
		log:      m.log.With("shardGroup", cfg.Group, "identity", cfg.Identity),
		series:   m.metrics.Shard(cfg.Group),
		wake:     make(chan struct{}, 1),
		served:   map[Resource]bool{},
		draining: map[int]*drainState{},
		starting: make([]bool, cfg.Ranges),
		serving:  make([]bool, cfg.Ranges),
		held:     make([]bool, cfg.Ranges),
		selector: shardhash.NothingSelected(),
		mode:     "not probed yet",
	}
}

// rangeOf is the range of key k: that of its namespace, or of its name
// for a cluster-scoped object.
func (s *shardRun) rangeOf(k Key) int {
	name := k.Namespace
	if name == "" {
		name = k.Name
	}
	return shardhash.Bucket(name, s.cfg.Ranges)
}

// owns implements keyOwner (the Manager's member hook): whether this
// member serves k's range now.
func (s *shardRun) owns(k Key) bool {
	r := s.rangeOf(k)
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.serving[r]
}

// leaseOf implements keyOwner: the lease context of a controller run
// on every replica ends only when the member lost its Lease, with that
// cause, so that its in-flight reconciles are cancelled at once.
func (s *shardRun) leaseOf(ctx context.Context) context.Context {
	lease, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	context.AfterFunc(s.lost, func() { cancel(context.Cause(s.lost)) })
	return lease
}

// informerMade sees each informer the cache makes (Manager.Shard wraps
// the cache's made hook with it): a namespaced informer lists and
// watches with the member's selector, and read-your-writes waits for its
// objects only where covers says so.
// Cluster-scoped ones hold everything (see shard.go).
func (s *shardRun) informerMade(inf cachedInformer) {
	sh, ok := inf.(shardable)
	if !ok || !inf.resource().Namespaced {
		return
	}
	tracker, ok := s.m.writes.(*writeTracker)
	if ok {
		tracker.shardBy(inf.resource(), s.covers)
	}
	s.mu.Lock()
	// Under mu: the informer gets the selector now current, and
	// updateSelector, which copies the list under mu, every later one.
	sh.setShard(s.selector)
	s.informers = append(s.informers, sh)
	s.mu.Unlock()
}

// namespaceChanged wakes the run loop when a namespace comes or goes:
// it may be in a held range.
func (s *shardRun) namespaceChanged(ev Event[metav1.PartialObjectMetadata]) {
	if ev.Type == Updated {
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// setLive records how many members the last look saw.
func (s *shardRun) setLive(n int) {
	s.mu.Lock()
	s.live = n
	s.looked = true
	s.mu.Unlock()
	s.series.Members.Store(int64(n))
}

// act holds the ranges to start (serveListed serves them once the
// caches hold their objects) and begins draining those to drain: their
// keys are no longer taken from now on.
func (s *shardRun) act(start, drain []int) {
	if len(start) == 0 && len(drain) == 0 {
		return
	}
	now := time.Now()
	s.mu.Lock()
	for _, r := range start {
		s.starting[r] = true
		s.held[r] = true
	}
	for _, r := range drain {
		s.starting[r] = false
		s.serving[r] = false
		s.draining[r] = &drainState{since: now}
	}
	s.releasing = len(s.draining)
	owned := shardhash.Count(s.serving)
	s.mu.Unlock()
	s.series.Owned.Store(int64(owned))
	s.series.Handovers.Add(uint64(len(start)))
	s.log.Info("sharding: ranges changed", "started", start,
		"draining", drain, "serving", owned)
	if len(start) > 0 {
		s.updateSelector()
	}
	s.serveListed()
}

// serveListed serves the starting ranges once every sharded informer
// has listed with the selector that takes them in: until then a
// reconcile of their keys could read a cache of another type (a
// ReplicaSet's Pods) that does not hold them yet. Then it queues again
// the cached keys of those ranges, and only those: every event of
// theirs came while they were not served (skipped, or before the
// member held them), so every object changed meanwhile is among them;
// the ranges served all along lost no event. The run loop calls it at
// each look, and every listingPoll while a range starts or the
// informers list a new selector (catchingUp).
func (s *shardRun) serveListed() {
	if shardhash.Count(s.starting) == 0 && !s.catchingUp() {
		return
	}
	nss, ok := s.listedAll()
	if !ok {
		return
	}
	gained := slices.Clone(s.starting)
	s.mu.Lock()
	s.listed = nss
	for r, st := range gained {
		if st {
			s.serving[r] = true
		}
	}
	owned := shardhash.Count(s.serving)
	s.mu.Unlock()
	clear(s.starting)
	if shardhash.Count(gained) == 0 {
		return
	}
	s.series.Owned.Store(int64(owned))
	s.log.Info("sharding: the caches hold the started ranges; "+
		"serving them", "serving", owned)
	inGained := func(k Key) bool { return gained[s.rangeOf(k)] }
	for _, c := range s.controllers() {
		c.replayKeys(inGained)
	}
}

// ignoresSelector reports whether the probe found that the server
// ignores the shard selector for res: its informer holds everything.
func (s *shardRun) ignoresSelector(res Resource) bool {
	served, known := s.served[res]
	return known && !served
}

// listingPoll is how often the run loop looks whether the informers
// have listed the starting ranges, or a new selector.
const listingPoll = 20 * time.Millisecond

// listedAll reports whether every sharded informer holds a list made
// with the current selector, or holds everything (its server ignores
// the selector), and returns the namespaces that selector names.
func (s *shardRun) listedAll() (map[string]bool, bool) {
	s.mu.RLock()
	sel := s.selector
	nss := s.selected
	infs := slices.Clone(s.informers)
	s.mu.RUnlock()
	for _, inf := range infs {
		if s.ignoresSelector(inf.resource()) {
			continue
		}
		if !inf.listedWith(sel) {
			return nil, false
		}
	}
	return nss, true
}

// drainStep moves each draining range on: once no reconcile of its keys
// is in flight, its objects are dropped (a new selector, a relist); once
// the caches hold none, it is released (hand.Drained), which the next
// renewal records. A range draining for longer than ShutdownTimeout
// moves on regardless, as a shutdown abandons such work, logged as an
// error.
func (s *shardRun) drainStep() {
	if len(s.draining) == 0 {
		return
	}
	late := s.m.opts.ShutdownTimeout
	present := s.presentRanges()
	dropped := false
	for r, d := range s.draining {
		overdue := time.Since(d.since) > late
		if !d.dropping {
			busy := s.inFlight(r)
			if busy && !overdue {
				continue
			}
			if busy {
				s.log.Error("sharding: abandoning reconciles "+
					"of a drained range that ignore "+
					"their context", "range", r,
					"after", late)
			}
			d.dropping = true
			dropped = true
			s.mu.Lock()
			s.held[r] = false
			s.mu.Unlock()
			continue
		}
		if present[r] && !overdue {
			continue
		}
		s.hand.Drained(r)
		s.released = true
		delete(s.draining, r)
		s.series.Handovers.Add(1)
		s.log.Info("sharding: range released", "range", r)
	}
	s.mu.Lock()
	s.releasing = len(s.draining)
	s.mu.Unlock()
	if dropped {
		s.updateSelector()
	}
}

// presentRanges tells which ranges the caches whose server honours the
// selector still hold objects of; the others hold everything anyway.
func (s *shardRun) presentRanges() []bool {
	present := make([]bool, s.cfg.Ranges)
	s.mu.RLock()
	infs := slices.Clone(s.informers)
	s.mu.RUnlock()
	for _, inf := range infs {
		if !s.served[inf.resource()] {
			continue
		}
		for r, held := range inf.heldRanges(s.cfg.Ranges) {
			present[r] = present[r] || held
		}
	}
	return present
}

// inFlight reports whether any controller reconciles a key of range r.
func (s *shardRun) inFlight(r int) bool {
	inRange := func(k Key) bool { return s.rangeOf(k) == r }
	for _, c := range s.controllers() {
		if c.inFlight(inRange) {
			return true
		}
	}
	return false
}

// busy reports whether any controller reconciles any key.
func (s *shardRun) busy() bool {
	all := func(Key) bool { return true }
	for _, c := range s.controllers() {
		if c.inFlight(all) {
			return true
		}
	}
	return false
}

// controllers are the Manager's controllers now.
func (s *shardRun) controllers() []shardedController {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	cs := make([]shardedController, 0, len(s.m.byName))
	for _, c := range s.m.byName {
		sharded, ok := c.(shardedController)
		if ok {
			cs = append(cs, sharded)
		}
	}
	return cs
}

// weights is the number of namespaces in each range, as this member's
// Namespace informer sees them now: what the assignment balances.
func (s *shardRun) weights() []int {
	nss, _ := s.namespaces.List(ListOptions{}) // no selector: no error
	w := make([]int, s.cfg.Ranges)
	for _, ns := range nss {
		w[shardhash.Bucket(ns.Name, s.cfg.Ranges)]++
	}
	return w
}

// updateSelector makes the selector name the namespaces of the held
// ranges and gives it to every sharded informer; if it changed, the
// informers list again with it, except those whose server ignores it.
// The run loop's only.
func (s *shardRun) updateSelector() {
	nss, _ := s.namespaces.List(ListOptions{}) // no selector: no error
	names := make([]string, len(nss))
	for i, ns := range nss {
		names[i] = ns.Name
	}
	s.mu.Lock()
	sel, selected := shardhash.HeldSelector(names, s.held)
	changed := sel != s.selector
	s.selector = sel
	s.selected = selected
	infs := slices.Clone(s.informers)
	s.mu.Unlock()
	if !changed {
		return
	}
	// Outside mu: an informer holds its lock for a whole store replace,
	// and owns and covers, which workers and cached reads call, take mu.
	// The run loop is the one caller, so no later selector is set before
	// this one; an informer made meanwhile got sel from informerMade.
	for _, inf := range infs {
		// Every informer gets it, those whose server ignores it too,
		// which send it at their next list or watch.
		inf.setShard(sel)
	}
	for _, inf := range infs {
		if s.ignoresSelector(inf.resource()) {
			continue
		}
		inf.reshard()
	}
}

// notReady is the readiness check "shard": nil once the member joined
// and looked at its group.
func (s *shardRun) notReady(*http.Request) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.looked {
		return fmt.Errorf("kctl: sharding: not yet a member "+
			"of group %q", s.cfg.Group)
	}
	return nil
}

// note is what /readyz shows of the member when ready, e.g. "group
// podcount, 3 members, 21/64 ranges, server-side selector".
func (s *shardRun) note() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return fmt.Sprintf("group %s, %d members, %d/%d ranges, %s",
		s.cfg.Group, s.live, shardhash.Count(s.serving), s.cfg.Ranges, s.mode)
}

// covers reports whether the caches hold, and go on holding while it
// does, the objects of namespace ns: this member serves its range, every
// sharded informer has listed with a selector that names it (one made
// since lists with the current selector), and the current selector names
// it. Read-your-writes waits only for the writes it covers
// (writeTracker.shardBy).
func (s *shardRun) covers(ns string) bool {
	r := shardhash.Bucket(ns, s.cfg.Ranges)
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.serving[r] && s.selected[ns] && s.listed[ns]
}

// catchingUp reports whether the informers have yet to list the
// current selector (as far as serveListed last saw): a namespace came
// or went in a held range.
func (s *shardRun) catchingUp() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return !maps.Equal(s.selected, s.listed)
}
