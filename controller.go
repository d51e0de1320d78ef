package kctl

// Controller[T]: the reconcile contract (Result, Terminal), the hooks
// its options fill (the reconcile chain, the observer), and how events
// become queued keys (onEvent: its predicates, then enqueue). Its run, and
// each reconcile's life, are in worker.go; its options (filters among
// them) and Controller.Enqueue in controller_options.go, the builder's
// mechanism (configure) and its other sources (Owns, Watches) in
// controller_sources.go.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/kctl-dev/kctl/internal/causes"
	"github.com/kctl-dev/kctl/internal/metachange"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Result tells the worker what to do after a successful reconcile.
type Result struct {
	// RequeueAfter > 0 reconciles the key again after this long, even if
	// nothing changes (e.g. to poll something outside the cluster).
	RequeueAfter time.Duration
}

// Terminal wraps err so the worker logs it and does not retry the key until
// the next event for it. errors.Is(Terminal(err), ErrTerminal) is true, and
// errors.Is and errors.As see err through it.
//
//	return kctl.Result{}, kctl.Terminal(err) // a bad spec: retrying cannot fix it
//
// Terminal(nil) is nil, as errors.Join() is: a reconcile returning it succeeded.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return terminalError{err}
}

// ErrTerminal matches every error made by Terminal.
var ErrTerminal = errors.New("kctl: terminal error")

// terminalError is Terminal's error. err is never nil when made by
// Terminal.
type terminalError struct{ err error }

func (e terminalError) Error() string {
	if e.err == nil {
		return ErrTerminal.Error()
	}
	return "terminal: " + e.err.Error()
}

func (e terminalError) Unwrap() []error { return []error{e.err, ErrTerminal} }

// outcome is what the reconcile contract makes of one reconcile, named
// as its history records it (ReconcileEntry.Result).
type outcome string

const (
	outcomeSuccess      outcome = "success"
	outcomeRequeueAfter outcome = "requeue_after"
	outcomeError        outcome = "error"
	outcomeConflict     outcome = "conflict"
	outcomeTimeout      outcome = "timeout"
	outcomeTerminal     outcome = "terminal"
)

// quietConflicts is the attempt at which a Conflict, which is retried
// quietly, is logged and counted as an error after all: the cache is not
// catching up, or the reconcile writes from a copy it did not just read.
const quietConflicts = 5

// errTimedOut ends the context of a reconcile at its timeout.
var errTimedOut = fmt.Errorf("reconcile timed out: %w",
	context.DeadlineExceeded)

// outcomeOf applies the reconcile contract (the table of Controller's
// doc) to a reconcile that ran for trigger t and returned res and err:
// the first row that matches decides. A Conflict is quiet before the
// quietConflicts attempt; past the timeout is a timeout, an error.
func outcomeOf(t Trigger, res Result, err error) outcome {
	switch {
	case errors.Is(err, ErrTerminal):
		return outcomeTerminal
	case errors.Is(err, errTimedOut):
		return outcomeTimeout
	case apierrors.IsConflict(err) && t.Attempt < quietConflicts:
		return outcomeConflict
	case err != nil:
		return outcomeError
	case res.RequeueAfter > 0:
		return outcomeRequeueAfter
	}
	return outcomeSuccess
}

// Controller reconciles objects of type T. Make it with NewController,
// then add sources (Owns, Watches, FromChannel) and options; the Manager
// starts it. Builder mistakes are returned by Manager.Start (logged as
// errors once Start has begun), never panics. Its configuration is fixed
// when it starts, once its caches have synced: make the builder calls of a
// controller made after Manager.Start right after NewController. A builder
// call after it started is ignored and logged as an error, except
// FromChannel, whose source starts reading at once.
//
// Contract of the reconcile function, decided by outcomeOf
// for both handle and the history, the first row that matches:
//
//	returns              worker does
//	Terminal(err)        log, forget the backoff, no retry (also past the timeout)
//	past its timeout     as other err (WithReconcileTimeout), even a Conflict
//	a Conflict           retry after the key's backoff, logged at debug, not as an error;
//	                     from the 5th failing attempt in a row on, as other err
//	other err != nil     retry after the key's backoff; Result ignored
//	RequeueAfter > 0     forget the backoff, reconcile again after RequeueAfter
//	Result{}, nil        forget the backoff
//
// The backoff is controller-runtime's default (see WithRateLimiter). A
// Conflict (apierrors.IsConflict) means the object changed on the server
// after the copy the write started from was read: with read-your-writes
// (see ClientFor) that is another writer's change the cache had not seen
// yet, which the retry will see (its 4 quick retries take about 75 ms).
// It is counted in kctl_reconcile_conflicts_total and as
// reconcile_total{result="requeue"}.
type Controller[T any] struct {
	controller[*T]
}

// controller is a Controller[T]'s state and work, over P = *T: its worker
// loop, queue and sources are compiled once for every T (see typeOps); the
// typed handle Controller[T] adds the builder calls. The reconcile work
// that needs T itself (the copy handed to reconcile) goes through ops.
type controller[P any] struct {
	name string
	host controllerHost
	res  Resource
	// reconcile is the innermost step of the chain: the user's function,
	// given the copy of k's cached object (NewController: not called if
	// none is cached), or the key alone (NewKeyController).
	reconcile reconcileFunc[P]
	// chain is the one way a reconcile option reaches the worker: the
	// steps around reconcile, ordered by rank (see middleware).
	chain    []middleware[P]
	informer *informer[P] // nil for a controller of keys
	client   *client[P]   // writes finalizers; uncached
	// ops copies the cached object for reconcile; nil for a controller
	// of keys, which reads no object.
	ops      *typeOps[P]
	log      *slog.Logger
	replays  []replayFunc // hand cached objects to their source's handler
	connects []func()     // add the sources' handlers to their informers, once synced
	caches   []syncer     // the informers of T and of every source; syncCaches waits for them
	// synced is closed once the caches have synced and the
	// configuration is fixed (syncCaches); runLed waits for it.
	synced chan struct{}

	// observer sees the run: metrics, history (see controllerObserver).
	// Set by run, before the workers start.
	observer controllerObserver

	workers int
	// everyReplica runs the controller on every replica (NeedLeader).
	everyReplica bool
	// lowIf says whether an object source's event queues its keys at
	// low priority: lowByDefault (setUp), or WithPriority's function.
	lowIf func(ObjectEvent) bool
	// predicates filter the events of T: those of WithEventFilter,
	// then of WithPredicates, each telling the observer of the run
	// the events it drops (noting, controller_options.go).
	predicates []Predicate
	filters    []Predicate       // every object source's, as given
	queueOpts  QueueOptions[Key] // Observer is set by run

	mu sync.Mutex
	// started is set once the caches have synced (syncCaches); from
	// then on the configuration above is fixed and builder calls are
	// ignored (see configure).
	started bool
	// active holds the keys being reconciled and since when, for the log of
	// an abandoned shutdown and WithLivenessBound's check.
	active map[Key]time.Time
	// queue is nil while the controller is not running (a standby replica):
	// events are then dropped, and each run starts a new queue filled with
	// every cached key (replays), so nothing that happened meanwhile is lost.
	queue *Queue[Key]
	// ledger holds the keys' causes (internal/causes has the rules): queued,
	// waiting, QueuedAgain's channels, and those of Enqueue and FromChannel
	// kept while not running, which the next run queues before its replay.
	ledger causes.Ledger[Key, Trigger]
}

// reconcileFunc is a step of a controller's reconcile chain, over P =
// *T: the reconcile of key k, with obj the copy of k's cached object, or
// nil (none is cached, a controller of keys, or a step outside the one
// that reads it: see middleware).
type reconcileFunc[P any] func(ctx context.Context, k Key, obj P) (Result, error)

// middleware is a step of a controller's reconcile chain: wrap returns
// next with the step's work around it. It is the one hook of reconcile
// options; a builder call adds its step with use (controller_options.go),
// and run builds the chain once per run (chained), which handle
// (worker.go) calls. A step of a higher rank wraps those of lower ranks:
//
//	rankReport  WarnAfterFailures (recorder.go): sees the final error
//	rankBound   WithReconcileTimeout (controller_options.go)
//	rankRead    worker.go's own step (read): a panic inside it becomes an
//	            error, and the steps inside it get the cached object
//	rankUser    WithMiddleware (controller_options.go)
//	rankObject  Finalizer (finalizer.go), OnDelete (controller_options.go)
type middleware[P any] struct {
	// name is the builder call that adds it: a second call replaces it.
	name string
	rank int
	wrap func(next reconcileFunc[P]) reconcileFunc[P]
}

// The ranks of the reconcile chain's steps (see middleware).
const (
	rankObject = iota
	rankUser
	rankRead
	rankBound
	rankReport
)

// chained is reconcile wrapped in every step of the chain.
func (c *controller[P]) chained() reconcileFunc[P] {
	r := c.reconcile
	for _, m := range c.chain {
		r = m.wrap(r)
	}
	return r
}

// controllerHost is the Manager that made a controller, as the
// controller uses it; *Manager implements it (manager_controllers.go,
// which comes after this file). It is the controller's way back to its
// Manager, not an extension point: the hooks behind it are the
// Manager's (observers, shard).
type controllerHost interface {
	// Cache is the Manager's cache, for the sources' informers.
	Cache() *Cache
	// Add runs a runnable with the Manager (FromChannel's reader).
	Add(r Runnable) error
	// misuse records a builder mistake, which Manager.Start returns.
	misuse(err error)
	// observer is the observer of a run of the controller name.
	observer(name string, workers int) controllerObserver
	// owner is the shard owner of keys, nil unless sharded: the
	// controllers then run on every replica, and workers skip the keys
	// this replica does not own.
	owner() keyOwner
	// drainBy is when a shutdown cancels in-flight reconciles; drained
	// is Options.ShutdownTimeout, for the log.
	drainBy() (time.Time, time.Duration)
}

// keyOwner is a sharded Manager's owner of keys (shard_state.go's
// shardRun, set by Manager.Shard), for its controllers.
type keyOwner interface {
	// owns reports whether this replica owns key k now. Called under
	// the controller's lock (see inFlight): fast, and no lock of the
	// controller.
	owns(k Key) bool
	// leaseOf is the lease context of a run on every replica: ctx's
	// values, ending only when this replica must stop reconciling at
	// once (the member lost its Lease).
	leaseOf(ctx context.Context) context.Context
}

// controllerObserver is a controller's one observer: what it does, for
// its metrics (controller_runtime_* and workqueue_* series) and its
// history. The Manager's observers hook makes one for each run
// (manager.go): the metrics registry's, which history.go's KeepHistory
// wraps. Its methods are called without the controller's lock; they
// must be fast and goroutine-safe.
type controllerObserver interface {
	QueueObserver
	// reconciled sees each reconcile of k: its trigger, when it started,
	// how long it took and what it returned (outcomeOf reads it).
	reconciled(k Key, t Trigger, start time.Time,
		took time.Duration, res Result, err error)
	// dropped sees an event of T for k that a predicate (by) dropped.
	dropped(k Key, by string)
	TimedOut()      // a reconcile ran past its timeout
	Panicked()      // a reconcile panicked (its result is an error)
	NotOwned()      // a key skipped: another shard member owns it
	WorkerStarted() // a worker starts a reconcile
	WorkerStopped() // and ends it
	SetQueue(depth func() int, inFlight func() (n int, unfinished, longest time.Duration))
}

// syncer is what a controller needs of an Informer[T] of any T.
type syncer interface {
	HasSynced() bool
	WaitForSync(ctx context.Context) error
	Err() error
}

// logError logs msg as an error of the controller.
func (c *controller[P]) logError(msg string) { c.log.Error(msg) }

// Enqueue is Controller.Enqueue in the core (Manager.Enqueue calls it).
func (c *controller[P]) Enqueue(k Key) { c.enqueue(k, Trigger{Cause: "manual", keep: true}) }

// onEvent turns an event of T into a queued key.
func (c *controller[P]) onEvent(ev event[P]) {
	m := metaOf(ev.Object)
	k := Key{m.GetNamespace(), m.GetName()}
	oe := objectEvent(ev)
	for _, p := range c.predicates {
		if !p(oe) {
			return // p told the observer (noting)
		}
	}
	t := Trigger{Cause: "created"}
	switch {
	case ev.Initial:
		t.Cause = "initial"
	case ev.Resync:
		t.Cause = "resync"
	case ev.Type == Updated:
		t.Cause = "updated"
		t.Detail = metachange.Kinds(metaOf(ev.Old), m) // e.g. "spec labels"
	case ev.Type == Deleted:
		t.Cause = "deleted"
		t.gone = ev.Object
	}
	if ev.Relisted {
		t.Detail = strings.TrimSpace(t.Detail + " (found by relist)")
	}
	t.low = c.lowIf(oe)
	c.enqueue(k, t)
}

// lowByDefault is the default priority of an event's keys (see
// WithPriority): those of an initial list, a replay and a periodic
// resync are low, behind the changes seen live.
func lowByDefault(ev ObjectEvent) bool { return ev.Initial || ev.Resync }

// enqueue remembers why k is queued (t, or the first cause since k was
// last taken) and adds k to the queue of the current run, at low priority
// if t.low. While the controller is not running, keys are dropped (the
// next run replays every cached object) or, if t.keep, kept for the next
// run.
func (c *controller[P]) enqueue(k Key, t Trigger) {
	c.mu.Lock()
	q := c.queue
	if q == nil {
		if t.keep {
			c.ledger.Keep(k, t)
		}
		c.mu.Unlock()
		return
	}
	t.queued = time.Now()
	c.ledger.Queue(k, t, (*Trigger).merge) // first cause wins, later ones merge; wakes QueuedAgain
	c.mu.Unlock()
	if t.low {
		q.AddLowPriority(k)
	} else {
		q.Add(k)
	}
}
