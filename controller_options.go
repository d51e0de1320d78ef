package kctl

// Floor 2: the Controller's options that only set how the core runs it
// (workers, backoff, queue, where it runs, the priority of its keys), and
// three steps of its reconcile chain (controller.go's middleware, which
// use adds): WithReconcileTimeout, OnDelete and WithMiddleware, the user's
// own; and what a running reconcile asks of its context: LoggerFrom (and
// WithLogger, for code that calls a reconcile itself), TriggerFrom and
// QueuedAgain. Its filters (WithPredicates, WithEventFilter, which fill
// the predicates controller.go's onEvent applies: noting names the one
// that drops an event of T, for the history) and the built-in
// predicates they and its sources (Owns, Watches, in
// controller_sources.go) take are here, and Enqueue and
// EnqueueWithPriority, a key asked for from anywhere. Last,
// NewKeyController: a controller whose work is keyed by something other
// than one object of a type (an aggregate, a singleton, something outside
// the cluster), whose reconcile function takes the key, with no informer.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/kctl-dev/kctl/internal/ctrlnames"
	"github.com/kctl-dev/kctl/internal/metachange"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WithPredicates filters the events of T itself: an event enqueues its key
// only if every predicate returns true.
func (c *Controller[T]) WithPredicates(p ...Predicate) *Controller[T] {
	return c.configure("WithPredicates", func() {
		for _, pred := range p {
			n := len(c.predicates) - len(c.filters) + 1
			by := fmt.Sprintf("WithPredicates #%d", n)
			c.predicates = append(c.predicates, c.noting(pred, by))
		}
	})
}

// WithEventFilter filters the events of every object source (T, Owns and
// Watches): an event enqueues keys only if every predicate returns true.
func (c *Controller[T]) WithEventFilter(p ...Predicate) *Controller[T] {
	return c.configure("WithEventFilter", func() {
		for _, pred := range p {
			n := len(c.filters)
			by := fmt.Sprintf("WithEventFilter #%d", n+1)
			// T's events meet every filter before any predicate
			c.predicates = slices.Insert(c.predicates, n, c.noting(pred, by))
			c.filters = append(c.filters, pred)
		}
	})
}

// noting is p, filtering the events of T, telling the observer of the
// run, if any, that by (the builder call that gave p, e.g.
// "WithEventFilter #2") dropped an event for its key: the first
// predicate that drops an event names it (History's LastDropped).
func (c *controller[P]) noting(p Predicate, by string) Predicate {
	return func(ev ObjectEvent) bool {
		if p(ev) {
			return true
		}
		k := Key{ev.Object.GetNamespace(), ev.Object.GetName()}
		c.mu.Lock()
		obs := c.observer
		c.mu.Unlock()
		if obs != nil { // nil before the first run
			obs.dropped(k, by)
		}
		return false
	}
}

// MaxConcurrentReconciles sets how many workers reconcile different keys at
// once. Defaults to 1.
func (c *Controller[T]) MaxConcurrentReconciles(n int) *Controller[T] {
	if n < 1 {
		c.host.misuse(fmt.Errorf("kctl: controller %q: MaxConcurrentReconciles(%d) must be at least 1", c.name, n))
		return c
	}
	return c.configure("MaxConcurrentReconciles", func() { c.workers = n })
}

// WithRateLimiter replaces the retry backoff. Defaults to controller-runtime's:
// the larger of a per-key exponential backoff (5 ms doubling with each
// consecutive failure up to 1000 s) and a token bucket shared by the
// controller's keys (10 retries per second, burst 100), that is
// NewRateLimiter[Key](5*time.Millisecond, 1000*time.Second, 10, 100).
func (c *Controller[T]) WithRateLimiter(rl RateLimiter[Key]) *Controller[T] {
	return c.configure("WithRateLimiter", func() { c.queueOpts.RateLimiter = rl })
}

// WithQueueOptions sets the options of the controller's queue: pacing
// (Debounce, MinInterval), AgeLowPriorityAfter and RateLimiter (as
// WithRateLimiter does; a nil RateLimiter keeps the one set before).
// Observer is ignored: the controller's metrics observe its queue.
// Defaults to QueueOptions[Key]{} (see Queue).
func (c *Controller[T]) WithQueueOptions(opts QueueOptions[Key]) *Controller[T] {
	return c.configure("WithQueueOptions", func() {
		if opts.RateLimiter == nil {
			opts.RateLimiter = c.queueOpts.RateLimiter
		}
		c.queueOpts = opts
	})
}

// use adds step m to the chain, in place of the one of the same name;
// c is being configured (under c.mu).
func (c *controller[P]) use(m middleware[P]) {
	same := func(o middleware[P]) bool { return o.name == m.name }
	c.chain = slices.DeleteFunc(c.chain, same)
	c.chain = append(c.chain, m)
	byRank := func(a, b middleware[P]) int { return cmp.Compare(a.rank, b.rank) }
	slices.SortStableFunc(c.chain, byRank)
}

// OnDelete sets a hook called, instead of reconcile, with the last known state
// of an object that is gone:
//
//	c.OnDelete(func(ctx context.Context, cm *corev1.ConfigMap) { metrics.Forget(cm.Name) })
//
// It is a notification, not a guarantee. It runs on the replica that leads
// (whose controller runs), for the deletes its cache sees while it leads,
// once per delete unless the object comes back first. A delete is never
// seen by OnDelete if it happens while no replica leads: while the process is
// down, before its cache syncs, during a leader change (a replica that does
// not lead keeps nothing for deletes, and a new leader does not run OnDelete
// for deletes made before it led), or if a leader loses its lease before the
// key is reconciled. Use Finalizer for cleanup that must happen: the object
// stays until cleanup succeeds, whichever replica leads.
func (c *Controller[T]) OnDelete(fn func(ctx context.Context, obj *T)) *Controller[T] {
	step := middleware[*T]{name: "OnDelete", rank: rankObject, wrap: func(next reconcileFunc[*T]) reconcileFunc[*T] {
		return func(ctx context.Context, k Key, obj *T) (Result, error) {
			t, _ := TriggerFrom(ctx)
			last, deleted := t.gone.(*T)
			if obj != nil || !deleted {
				return next(ctx, k, obj)
			}
			fn(ctx, c.ops.deepCopy(last))
			return Result{}, nil
		}
	}}
	return c.configure("OnDelete", func() { c.use(step) })
}

// WithReconcileTimeout bounds each reconcile: its context ends d after it
// starts, as controller-runtime's ReconciliationTimeout does.
//
//	c.WithReconcileTimeout(30 * time.Second)
//
// A reconcile still running when d passes is counted in
// controller_runtime_reconcile_timeouts_total{controller}, and its result
// is an error (wrapping context.DeadlineExceeded and the error it
// returned, if any) retried with the key's backoff, even a Conflict; a
// Terminal error it returned stays terminal (History records it as
// "terminal", not "timeout"). A reconcile that ignores its context still
// holds its worker until it returns. Defaults to 0: no bound.
func (c *Controller[T]) WithReconcileTimeout(d time.Duration) *Controller[T] {
	if d < 0 {
		c.host.misuse(fmt.Errorf("kctl: controller %q: "+
			"WithReconcileTimeout(%v) must not be negative "+
			"(0 means no timeout)", c.name, d))
		return c
	}
	step := middleware[*T]{name: "WithReconcileTimeout", rank: rankBound, wrap: func(next reconcileFunc[*T]) reconcileFunc[*T] {
		return c.bounded(d, next)
	}}
	return c.configure("WithReconcileTimeout", func() { c.use(step) })
}

// bounded is next bounded by d, if d > 0 (WithReconcileTimeout): a
// reconcile still running when d passes is counted, and its result is
// an error.
func (c *controller[P]) bounded(d time.Duration, next reconcileFunc[P]) reconcileFunc[P] {
	if d <= 0 {
		return next
	}
	return func(ctx context.Context, k Key, obj P) (Result, error) {
		ctx, cancel := context.WithTimeoutCause(ctx, d, errTimedOut)
		defer cancel()
		res, err := next(ctx, k, obj)
		if !errors.Is(context.Cause(ctx), errTimedOut) {
			return res, err
		}
		c.observer.TimedOut()
		msg := fmt.Sprintf("kctl: reconcile of %s %s "+
			"ran past its timeout of %v (WithReconcileTimeout)",
			c.res.Kind, k, d)
		if err == nil {
			return Result{}, fmt.Errorf("%s: %w", msg, errTimedOut)
		}
		return Result{}, fmt.Errorf("%s: %w; it returned: %w",
			msg, errTimedOut, unprefixed(err))
	}
}

// ReconcileFunc is a controller's reconcile as a middleware sees it
// (WithMiddleware): the reconcile of key k, with obj a copy of k's cached
// object, or nil (none is cached, and for a controller of keys).
type ReconcileFunc[T any] func(ctx context.Context, k Key, obj *T) (Result, error)

// WithMiddleware wraps every reconcile of the controller in mw, so that a
// span, a per-tenant limiter or an audit log runs around it without kctl
// depending on any of them:
//
//	c.WithMiddleware(func(next kctl.ReconcileFunc[T]) kctl.ReconcileFunc[T] {
//		return func(ctx context.Context, k kctl.Key, obj *T) (kctl.Result, error) {
//			t, _ := kctl.TriggerFrom(ctx) // why it runs, which attempt
//			start := time.Now()
//			res, err := next(ctx, k, obj)
//			slog.Info("reconciled", "key", k, "trigger", t.Cause, "attempt", t.Attempt, "took", time.Since(start), "err", err)
//			return res, err
//		}
//	})
//
// The first middleware given is the outermost; a later call adds its
// middlewares inside those of the calls before. They run inside the step
// that reads the cache (obj is the reconcile's own copy; a panic in a
// middleware becomes an error, as one in reconcile does) and inside
// WithReconcileTimeout's bound; Finalizer and OnDelete run inside them. A
// middleware that returns without calling next skips the reconcile; what
// it returns is the reconcile's outcome. NewController's function is not
// called for a nil obj (the object is gone), but a middleware is.
// example/tracing adds OpenTelemetry spans this way. Defaults to none.
func (c *Controller[T]) WithMiddleware(mw ...func(next ReconcileFunc[T]) ReconcileFunc[T]) *Controller[T] {
	isNil := func(m func(ReconcileFunc[T]) ReconcileFunc[T]) bool { return m == nil }
	if slices.ContainsFunc(mw, isNil) {
		c.host.misuse(fmt.Errorf("kctl: controller %q: WithMiddleware was given a nil middleware", c.name))
		return c
	}
	inner := func(next reconcileFunc[*T]) reconcileFunc[*T] {
		r := ReconcileFunc[T](next)
		for i, m := range slices.Backward(mw) {
			r = m(r)
			if r == nil {
				return c.nilMiddleware(i)
			}
		}
		return reconcileFunc[*T](r)
	}
	return c.configure("WithMiddleware", func() {
		step := middleware[*T]{name: "WithMiddleware", rank: rankUser, wrap: inner}
		i := slices.IndexFunc(c.chain, func(m middleware[*T]) bool { return m.name == step.name })
		if i >= 0 { // an earlier call's middlewares stay outside
			outer := c.chain[i].wrap
			step.wrap = func(next reconcileFunc[*T]) reconcileFunc[*T] { return outer(inner(next)) }
		}
		c.use(step)
	})
}

// nilMiddleware is the reconcile of a chain whose middleware #i (from 0)
// returned a nil function: each reconcile fails, naming it.
func (c *controller[P]) nilMiddleware(i int) reconcileFunc[P] {
	err := fmt.Errorf("kctl: controller %q: WithMiddleware's middleware #%d returned a nil ReconcileFunc", c.name, i+1)
	return func(context.Context, Key, P) (Result, error) { return Result{}, Terminal(err) }
}

// LoggerFrom returns the logger kctl put in ctx: in a reconcile the Manager's
// logger with controller, namespace, name and reconcileID; in a runnable the
// Manager's logger; else slog.Default().
func LoggerFrom(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// WithLogger returns a copy of ctx whose LoggerFrom is l: for code that
// calls a reconcile function or a runnable itself, a unit test above all
// (kctltest.Context does it), so that what it logs goes where l writes.
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// TriggerFrom returns the Trigger of the reconcile running with ctx.
func TriggerFrom(ctx context.Context) (Trigger, bool) {
	t, ok := ctx.Value(triggerKey{}).(Trigger)
	return t, ok
}

// QueuedAgain returns a channel that is closed once the key of the
// reconcile running with ctx is queued again while it runs: by a change
// of its object, an event of one of its sources, a resync, or Enqueue.
// The key is then reconciled again as soon as this reconcile returns, so
// a long one can cut its work short and leave the rest to the next,
// which sees the newer state:
//
//	select {
//	case <-kctl.QueuedAgain(ctx):
//		return kctl.Result{}, nil // the next reconcile starts over
//	case <-copied:
//	}
//
// What the reconcile itself returns (a retry, RequeueAfter) queues the
// key only after it returns, and does not close it. Outside a reconcile
// QueuedAgain returns nil, a channel that is never closed.
func QueuedAgain(ctx context.Context) <-chan struct{} {
	t, _ := TriggerFrom(ctx)
	return t.again
}

// NeedLeader(false) runs the controller on every replica, whether it
// leads or not, as Runnable.NeedLeader does for a runnable: for work that
// each replica does for itself (e.g. state held in the process).
//
//	c.NeedLeader(false) // reconciles on every replica
//
// A FromChannel reader runs on every replica either way. Defaults to true: the
// controller runs only while this replica leads (see ElectLeader; without
// leader election every Manager leads).
func (c *Controller[T]) NeedLeader(need bool) *Controller[T] {
	return c.configure("NeedLeader", func() { c.everyReplica = !need })
}

// The built-in predicates, for WithPredicates, WithEventFilter, Owns and
// Watches.

var (
	// GenerationChanged passes updates that changed metadata.generation (the spec).
	GenerationChanged Predicate = updatedOnly(metachange.Generation)
	// LabelsChanged passes updates that changed the labels.
	LabelsChanged Predicate = updatedOnly(metachange.Labels)
	// AnnotationsChanged passes updates that changed the annotations.
	AnnotationsChanged Predicate = updatedOnly(metachange.Annotations)
	// ResourceVersionChanged passes updates that changed anything, dropping resyncs.
	ResourceVersionChanged Predicate = updatedOnly(versionChanged)
)

func versionChanged(old, cur metav1.Object) bool {
	return old.GetResourceVersion() != cur.GetResourceVersion()
}

func updatedOnly(changed func(old, cur metav1.Object) bool) Predicate {
	return func(e ObjectEvent) bool {
		if e.Type != Updated || e.Old == nil {
			return true
		}
		return changed(e.Old, e.Object)
	}
}

// Or passes an event that any of preds passes.
func Or(preds ...Predicate) Predicate {
	return func(e ObjectEvent) bool {
		for _, p := range preds {
			if p(e) {
				return true
			}
		}
		return false
	}
}

// Priority is the priority a key is queued with: a low key is handed to
// a worker after the normal ones, until it has waited
// AgeLowPriorityAfter (see Queue). The zero value is PriorityNormal.
type Priority int

const (
	// PriorityNormal is a live change's priority.
	PriorityNormal Priority = iota
	// PriorityLow is for work that may wait behind live changes: by
	// default, the keys of an initial list, a replay and a resync.
	PriorityLow
)

// WithPriority chooses the priority of the keys of every object source's
// events (T, Owns and Watches) that pass the predicates: a low key is
// handed to a worker after the normal ones, until it has waited the
// queue's AgeLowPriorityAfter (see WithQueueOptions), so neither starves.
//
//	c.WithPriority(func(e kctl.ObjectEvent) kctl.Priority {
//		if _, ok := e.Object.(*corev1.Pod); ok {
//			return kctl.PriorityLow // Pods change often; the rest goes first
//		}
//		return kctl.PriorityNormal
//	})
//
// A key keeps its priority when it is requeued (retry, RequeueAfter).
// Defaults to nil: low for the events of an initial list, a replay and a
// periodic resync, normal for the rest (ObjectEvent's Initial and Resync).
func (c *Controller[T]) WithPriority(fn func(ObjectEvent) Priority) *Controller[T] {
	low := lowByDefault
	if fn != nil {
		low = func(ev ObjectEvent) bool { return fn(ev) == PriorityLow }
	}
	return c.configure("WithPriority", func() { c.lowIf = low })
}

// Enqueue asks for a reconcile of key, from anywhere (e.g. an HTTP handler).
// Its trigger is "manual". A key that arrives while the controller is not
// running (before Start, or on a standby replica) is kept until it runs.
// Keys name objects of T: a key whose object is not in the cache is not
// reconciled, and OnDelete runs for it only if the controller saw that
// object's delete and has not yet handed it to OnDelete (see OnDelete); a
// key that names no object does nothing.
func (c *Controller[T]) Enqueue(k Key) { c.controller.Enqueue(k) }

// EnqueueWithPriority is Enqueue at priority p:
//
//	c.EnqueueWithPriority(k, kctl.PriorityLow) // after live changes
func (c *Controller[T]) EnqueueWithPriority(k Key, p Priority) {
	t := Trigger{Cause: "manual", low: p == PriorityLow, keep: true}
	c.enqueue(k, t)
}

// NewKeyController makes a controller named name that calls reconcile for
// every key its sources enqueue, whether or not the key names an object:
//
//	c := kctl.NewKeyController(mgr, "pod-summary", func(ctx context.Context, k kctl.Key) (kctl.Result, error) {
//		// recompute the ConfigMap k.Namespace/k.Name from every Pod of k.Namespace
//	})
//	kctl.Watches(c, func(p *corev1.Pod) []kctl.Key { return []kctl.Key{{Namespace: p.Namespace, Name: "pod-summary"}} })
//
// It has no type of its own: its keys come from Watches, FromChannel and
// Enqueue, with the queue, backoff, metrics, triggers, options and leader
// rules of NewController (a key from Watches is replayed at each run, as
// the keys of a controller's own objects are). Owns needs the owner's
// kind, which a key has not: it is an error from Manager.Start; use
// Watches instead. OnDelete and Finalizer do nothing on it: there is no
// object to hand them.
func NewKeyController(
	m *Manager,
	name string,
	reconcile func(ctx context.Context, k Key) (Result, error),
) *Controller[Key] {
	c := &Controller[Key]{}
	c.setUp(m, name)
	c.reconcile = func(ctx context.Context, k Key, _ *Key) (Result, error) {
		return reconcile(ctx, k)
	}
	c.res = Resource{Kind: "key"}
	m.register(&c.controller, name, "keys, made at "+ctrlnames.Caller())
	return c
}
