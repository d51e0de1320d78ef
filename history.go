package kctl

// An extra: each controller's per-key reconcile history and the state of
// a key now (KeepHistory, History, Histories), served by kctl/debug;
// through the Manager's observers hook, which it wraps.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kctl-dev/kctl/internal/history"
)

// HistoryOptions bound the history KeepHistory keeps, per controller.
// The zero value keeps the defaults.
type HistoryOptions struct {
	// PerKey is how many reconciles are kept per key, the last ones.
	// Defaults to 10.
	PerKey int
	// Keys is how many keys are kept; a new key drops the one least
	// recently reconciled or dropped. Defaults to 1000.
	Keys int
}

// ReconcileEntry is one reconcile in a key's history.
type ReconcileEntry struct {
	Trigger string `json:"trigger"`
	Detail  string `json:"detail,omitempty"`
	// QueuedAt is when the trigger's cause queued the key.
	QueuedAt time.Time     `json:"queuedAt"`
	Waited   time.Duration `json:"waited"`
	Start    time.Time     `json:"start"`
	Took     time.Duration `json:"took"`
	Attempt  int           `json:"attempt"`
	// Result is success, requeue_after, error, conflict (retried
	// quietly), terminal or timeout.
	Result       string        `json:"result"`
	Error        string        `json:"error,omitempty"`
	RequeueAfter time.Duration `json:"requeueAfter,omitempty"`
}

// KeyState is where a key is now.
type KeyState struct {
	// Queued is set while the key waits for a worker, for QueuedBy.
	Queued   bool   `json:"queued"`
	QueuedBy string `json:"queuedBy,omitempty"`
	// WaitingUntil is when a retry or requeue-after brings it back
	// (WaitingFor); zero if none.
	WaitingUntil time.Time `json:"waitingUntil,omitzero"`
	WaitingFor   string    `json:"waitingFor,omitempty"`
	// BackoffAttempt counts its consecutive failures.
	BackoffAttempt int `json:"backoffAttempt"`
	// InFlightSince is when its running reconcile started; zero if none.
	InFlightSince time.Time `json:"inFlightSince,omitzero"`
	// LastDropped names the predicate that dropped its last filtered
	// event of the controller's own type, at LastDroppedAt.
	LastDropped   string    `json:"lastDropped,omitempty"`
	LastDroppedAt time.Time `json:"lastDroppedAt,omitzero"`
}

// KeyHistory is a key's last reconciles, oldest first, and its state.
type KeyHistory struct {
	Controller string           `json:"controller"`
	Key        Key              `json:"key"`
	Reconciles []ReconcileEntry `json:"reconciles"`
	State      KeyState         `json:"state"`
}

// KeepHistory makes every controller of the Manager keep, per key, its
// last reconciles and why its last event was dropped, for History and
// kctl/debug's ServeHistory:
//
//	mgr.KeepHistory(kctl.HistoryOptions{})
//	...
//	h, err := mgr.History("podcount", kctl.Key{Namespace: "shop", Name: "web"})
//
// Memory is bounded: PerKey entries for each of Keys keys per controller,
// the least recently used dropped: at most about 350 bytes per entry
// plus its error text, so about 3.5 MB per controller with the defaults
// and short errors (measured: 413 bytes per entry with a 101-byte error
// of its own, 100,000 keys through
// TestHistory_HundredThousandKeys_StayWithinBound).
// A controller starts keeping it at its next run (at once before
// Start). It is off unless asked for, and costs nothing then. Calling it
// again changes nothing.
func (m *Manager) KeepHistory(opts HistoryOptions) {
	if opts.PerKey <= 0 {
		opts.PerKey = 10
	}
	if opts.Keys <= 0 {
		opts.Keys = 1000
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.observers.(*historyBooks); ok {
		return
	}
	m.observers = &historyBooks{
		next:  m.observers,
		books: newBooks(opts),
	}
}

// books returns the Manager's history books, if it keeps history.
func (m *Manager) books() (*historyBooks, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.observers.(*historyBooks)
	return b, ok
}

// History returns the history of key k of the controller named name. It
// fails if history is off (KeepHistory) or no controller has that name; a
// key with no history has an empty one, with its state.
func (m *Manager) History(name string, k Key) (KeyHistory, error) {
	m.mu.Lock()
	c, ok := m.byName[name]
	m.mu.Unlock()
	books, on := m.books()
	if !on {
		return KeyHistory{}, errors.New("kctl: History: history is " +
			"off: call mgr.KeepHistory (or debug.ServeHistory) before Start")
	}
	if !ok {
		return KeyHistory{}, fmt.Errorf("kctl: History(%q): no "+
			"controller of that name", name)
	}
	var h KeyHistory
	book := books.books.Of(name)
	h.Reconciles, h.State.LastDropped, h.State.LastDroppedAt = book.Get(k)
	h.Controller = name
	h.Key = k
	s := c.(interface{ stateOf(k Key) keyState }).stateOf(k)
	h.State.Queued = s.queued != nil
	if s.queued != nil {
		h.State.QueuedBy = s.queued.Cause
	}
	if s.waiting != nil {
		h.State.WaitingFor = s.waiting.Cause
		h.State.WaitingUntil = s.due
	}
	h.State.BackoffAttempt = s.failures
	h.State.InFlightSince = s.since
	return h, nil
}

// Histories returns every controller of the Manager, by name, with the
// keys it keeps a history of, the most recently reconciled or dropped
// first (see History for each); nil while history is off. kctl/debug
// serves it as pages.
func (m *Manager) Histories() map[string][]Key {
	books, on := m.books()
	if !on {
		return nil
	}
	m.mu.Lock()
	names := slices.Collect(maps.Keys(m.byName))
	m.mu.Unlock()
	out := make(map[string][]Key, len(names))
	for _, name := range names {
		out[name] = books.books.Of(name).Keys()
	}
	return out
}

// historyBooks is the Manager's observers hook with KeepHistory: it
// wraps the observers set before it (next), adding each controller's
// book (internal/history).
type historyBooks struct {
	next interface {
		observer(name string, workers int) controllerObserver
	}
	books *history.Books[Key, ReconcileEntry]
}

// newBooks returns the books of KeepHistory's opts (completed).
func newBooks(opts HistoryOptions) *history.Books[Key, ReconcileEntry] {
	return history.NewBooks[Key, ReconcileEntry](opts.PerKey, opts.Keys)
}

// observer is next's observer of a run of controller name, keeping its
// history too.
func (b *historyBooks) observer(name string, workers int) controllerObserver {
	return historyObserver{b.next.observer(name, workers), b.books.Of(name)}
}

// historyObserver is a controller's observer that keeps its history
// in book, and passes on what it sees.
type historyObserver struct {
	controllerObserver
	book *history.Book[Key, ReconcileEntry]
}

func (o historyObserver) reconciled(k Key, t Trigger, start time.Time, took time.Duration, res Result, err error) {
	o.controllerObserver.reconciled(k, t, start, took, res, err)
	o.book.Add(k, entryOf(t, start, took, res, err))
}

func (o historyObserver) dropped(k Key, by string) {
	o.controllerObserver.dropped(k, by)
	o.book.Dropped(k, by, time.Now())
}

// entryOf is a reconcile's entry in its key's history.
func entryOf(t Trigger, start time.Time, took time.Duration, res Result, err error) ReconcileEntry {
	entry := ReconcileEntry{
		Trigger:  t.Cause,
		Detail:   t.Detail,
		QueuedAt: t.queued,
		Waited:   t.Waited,
		Start:    start,
		Took:     took,
		Attempt:  t.Attempt,
		Result:   string(outcomeOf(t, res, err)),
	}
	if err != nil {
		entry.Error = err.Error()
	} else {
		entry.RequeueAfter = res.RequeueAfter
	}
	return entry
}

// keyState is where a key is now, for its history.
type keyState struct {
	queued   *Trigger  // why it is queued; nil if not
	waiting  *Trigger  // why a wait brings it back; nil if none
	due      time.Time // when that wait ends
	failures int       // its consecutive failures
	since    time.Time // in flight since; zero if not
}

// stateOf is where k is now.
func (c *controller[P]) stateOf(k Key) keyState {
	c.mu.Lock()
	defer c.mu.Unlock()
	var s keyState
	s.queued = c.ledger.Queued(k)
	s.waiting = c.ledger.Waiting(k)
	s.since = c.active[k]
	q := c.queue
	if q != nil {
		s.due, _ = q.WaitingUntil(k)
		s.failures = q.NumRequeues(k)
	}
	return s
}
