// Package kctl is a small Kubernetes controller framework with generics.
//
// A Controller[T] watches one Go type (corev1.Pod, appsv1.ReplicaSet, or your
// own CRD struct) and calls your reconcile function with the latest *T. No
// Scheme, no RESTMapper, no code generation: the Go type says what is watched.
// A Manager shares one connection, one cache and the leader election between
// controllers, and runs them until its context ends.
//
// # Data flow
//
//	API server ──list/watch──▶ cache.go (Informer[T], store, indexes)
//	    ▲                          │ Event[T]
//	    │                          ▼
//	    │              controller.go (sources, predicates) ──keys──▶ queue.go (Queue[Key])
//	    │                                                                 │ Get
//	    │                                                                 ▼
//	    └──── client.go (Client[T]) ◀──── your Reconcile(ctx, *T) ◀──── worker
//
// # Guarantees
//
//   - A key is never reconciled by two workers at once, however many workers run.
//   - Reconcile gets the cache's latest state of the object when the worker
//     takes the key, as a copy it may change; after the reconcile writes that
//     object through a kctl Client, the next reconcile of the key waits until
//     the cache holds that write (read your writes).
//   - Reconciliation is level-based: many events for one key before a worker
//     takes it give one reconcile. Do not count events; look at the state.
//   - An error requeues with per-key exponential backoff; success forgets it;
//     a panic is recovered and treated as an error; a Terminal error is logged
//     and not retried.
//   - On shutdown, workers stop taking keys and in-flight reconciles get
//     Options.ShutdownTimeout (default 30 s) to finish.
//
// # Example
//
//	mgr, err := kctl.NewManager(kctl.Options{})
//	if err != nil { ... }
//	pods := kctl.ClientFor[corev1.Pod](mgr)
//	rsets := kctl.ClientFor[appsv1.ReplicaSet](mgr)
//	c := kctl.NewController(mgr, "podcount", func(ctx context.Context, rs *appsv1.ReplicaSet) (kctl.Result, error) {
//		sel, _ := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
//		list, err := pods.List(ctx, kctl.ListOptions{Namespace: rs.Namespace, Labels: sel})
//		if err != nil { return kctl.Result{}, err }
//		rs.Labels["pod-count"] = strconv.Itoa(len(list))
//		return kctl.Result{}, rsets.Update(ctx, rs)
//	})
//	kctl.Owns[corev1.Pod](c) // a Pod's controller owner reference enqueues its ReplicaSet
//	err = mgr.Start(kctl.SignalContext())
package kctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// Options configure a Manager. The zero value is ready to use.
type Options struct {
	// Kubeconfig is a kubeconfig path (a --kubeconfig flag). Defaults to
	// LoadConfig's search: $KUBECONFIG, the in-cluster service account,
	// then ~/.kube/config.
	Kubeconfig string
	// Config, when set, is used as is and Kubeconfig is ignored.
	Config *rest.Config
	// Logger receives kctl's logs and client-go's klog output. Defaults to slog.Default().
	Logger *slog.Logger
	// ShutdownTimeout bounds how long in-flight reconciles may run after the
	// Manager's context ends. Defaults to 30 s.
	ShutdownTimeout time.Duration
	// Cache configures the shared cache (per-type scopes, transforms).
	Cache CacheOptions
}

// Runnable is a long-running part of a program that the Manager starts and
// stops with everything else, e.g. an HTTP endpoint that enqueues keys.
type Runnable struct {
	Name string
	// NeedLeader makes the Manager run it only while this replica leads.
	NeedLeader bool
	// Run works until ctx ends. A returned error (other than ctx's) stops the
	// whole Manager, and Start returns it.
	Run func(ctx context.Context) error
}

// Manager runs controllers and runnables over one connection and one shared
// cache. Make it with NewManager, add controllers (NewController) and
// runnables (Add), then call Start once. Its methods are safe for concurrent
// use; adding after Start is an error returned by Add.
//
// The optional parts are turned on by a call before Start: ServeMetrics,
// ServeHealth, ElectLeader, EventRecorder. A program that does not call one
// does not link its code (the linker drops it), so it pays nothing for it.
type Manager struct {
	conn    *Conn
	cache   *Cache
	log     *slog.Logger
	opts    Options
	writes  *writeTracker
	metrics *metrics
	health  *health
	// elect runs lead only while this replica holds the lease (see
	// ElectLeader); nil runs it at once. A func, not an *elector, so that
	// leader election is linked only into programs that call ElectLeader.
	elect func(ctx context.Context, lead func(leaderCtx context.Context)) error

	mu        sync.Mutex
	started   bool
	runCtx    context.Context           // Start's context, for recorders made after Start
	recorders map[string]*EventRecorder // by component
	runnables []Runnable
	informers []syncer // the controllers' informers; Start waits for them
	errs      []error  // builder misuse, returned by Start
}

// NewManager loads the configuration (see LoadConfig), connects and makes the
// shared cache. It starts nothing: Start does.
func NewManager(opts Options) (*Manager, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 30 * time.Second
	}
	cfg := opts.Config
	if cfg == nil {
		var err error
		if cfg, err = LoadConfig(opts.Kubeconfig); err != nil {
			return nil, err
		}
	}
	conn, err := NewConn(cfg)
	if err != nil {
		return nil, err
	}
	klog.SetSlogLogger(opts.Logger) // client-go's own logs go to the same handler
	m := &Manager{conn: conn, log: opts.Logger, opts: opts, writes: newWriteTracker(),
		metrics: newMetrics(), health: newHealth()}
	conn.requests = m.metrics.requests
	m.cache = NewCache(conn, opts.Cache)
	m.health.add("ping", false, func(*http.Request) error { return nil })
	return m, nil
}

// Cache returns the Manager's shared cache, e.g. to scope one type before
// its first use:
//
//	kctl.ScopeFor[corev1.Secret](mgr.Cache(), kctl.Scope{Namespaces: []string{"app"}})
func (m *Manager) Cache() *Cache { return m.cache }

// HTTPServer returns a Runnable that serves h on addr (e.g. "127.0.0.1:8082")
// while the Manager runs, for endpoints that enqueue keys or report state.
func HTTPServer(name, addr string, h http.Handler) Runnable {
	return Runnable{Name: name, Run: func(ctx context.Context) error { return serve(ctx, name, addr, h, slog.Default()) }}
}

// ServeMetrics serves Prometheus metrics at /metrics on addr while the
// Manager runs, e.g. "127.0.0.1:8080" (":8080" listens on every interface:
// ask for it only in a Pod). It is Add of a Runnable named "metrics", so call
// it before Start; "" adds nothing, so that a flag can turn metrics off.
// Metrics are off unless you call it.
func (m *Manager) ServeMetrics(addr string) error {
	if addr == "" {
		return nil
	}
	return m.Add(m.server("metrics", addr, http.StripPrefix("/metrics", m.metrics.handler())))
}

// ServeHealth serves the probes /healthz and /readyz on addr while the
// Manager runs, e.g. "127.0.0.1:8081". /readyz is 200 once every
// controller's cache has synced and every AddReadyCheck passes. It is Add of
// a Runnable named "health", so call it before Start; "" adds nothing.
// Probes are off unless you call it.
func (m *Manager) ServeHealth(addr string) error {
	if addr == "" {
		return nil
	}
	return m.Add(m.server("health", addr, m.health.handler()))
}

// server is HTTPServer logging to m's logger.
func (m *Manager) server(name, addr string, h http.Handler) Runnable {
	return Runnable{Name: name, Run: func(ctx context.Context) error { return serve(ctx, name, addr, h, m.log) }}
}

// AddReadyCheck adds a check to /readyz: the replica is ready only while
// every ready check returns nil.
func (m *Manager) AddReadyCheck(name string, check func(r *http.Request) error) {
	m.health.add(name, true, check)
}

// AddHealthCheck adds a check to /healthz: a failing one makes the kubelet
// restart the container, so check only what a restart would fix.
func (m *Manager) AddHealthCheck(name string, check func(r *http.Request) error) {
	m.health.add(name, false, check)
}

// EventRecorder returns a recorder of Kubernetes Events about objects,
// reported as coming from component (usually the controller's name).
// Events are written in the background while the Manager runs, on every
// replica; one recorder is shared per component.
func (m *Manager) EventRecorder(component string) *EventRecorder {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.recorders[component]; ok {
		return r
	}
	r := newEventRecorder(m.conn, component, m.log)
	if m.recorders == nil {
		m.recorders = map[string]*EventRecorder{}
	}
	m.recorders[component] = r
	if m.runCtx != nil {
		go r.deliver(m.runCtx)
	} else { // a runnable, not a loop over recorders in Start: programs without Events do not link them
		m.runnables = append(m.runnables, Runnable{Name: "events of " + component, Run: func(ctx context.Context) error { r.deliver(ctx); return nil }})
	}
	return r
}

// ClientFor returns a client for T whose reads come from the manager's shared
// cache (as copies you may change) and whose writes go to the API server.
// The cache's informer for T starts on the first read. Use Uncached() on the
// result to read from the API server instead.
func ClientFor[T any, PT Object[T]](m *Manager) *Client[T] {
	c := NewClient[T, PT](m.conn)
	c.cache = func(ctx context.Context) (*Informer[T], error) { return readInformer[T, PT](m.cache) }
	if res, err := ResourceOf[T](); err == nil {
		c.afterWrite = func(obj metav1.Object) { m.writes.record(res, obj) }
	}
	return c
}

// Add registers a runnable to start with the Manager. It fails after Start.
func (m *Manager) Add(r Runnable) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return fmt.Errorf("kctl: Add(%q) after Start: add every runnable before calling Start", r.Name)
	}
	if r.Run == nil {
		return fmt.Errorf("kctl: runnable %q has no Run function", r.Name)
	}
	m.runnables = append(m.runnables, r)
	return nil
}

// misuse records a builder error; Start returns all of them.
func (m *Manager) misuse(err error) {
	m.mu.Lock()
	m.errs = append(m.errs, err)
	m.mu.Unlock()
}

// Start runs everything until ctx ends or a runnable fails, then shuts down
// gracefully and returns. A cache that cannot sync (e.g. its CRD is not
// installed, or its list is Forbidden) does not end Start: it keeps retrying,
// logs why, and /readyz names it. The order is:
//  1. start the shared cache (informers of every controller),
//  2. start runnables that do not need leadership,
//  3. wait for the controllers' caches to sync,
//  4. start controllers and leader-only runnables.
//
// When ctx ends, runnables are cancelled, controllers stop taking keys and
// in-flight reconciles get ShutdownTimeout to finish. Start returns nil after
// a clean shutdown (ctx cancelled or past its deadline), or the first error
// of a runnable (the metrics and health servers are runnables too) or of the
// leader election. Call it once.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return errors.New("kctl: Manager.Start called twice: a Manager runs once; make a new one to start again")
	}
	m.started = true
	if err := errors.Join(m.errs...); err != nil {
		m.mu.Unlock()
		return err
	}
	runnables := append([]Runnable(nil), m.runnables...)
	informers := m.informers
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	g := &group{cancel: cancel}
	m.runCtx = ctx
	m.mu.Unlock()

	g.spawn(func() error { return m.cache.Start(ctx) })
	m.health.add("caches", true, func(*http.Request) error { return notSynced(informers) })
	var leaderOnly []Runnable
	for _, r := range runnables {
		if r.NeedLeader {
			leaderOnly = append(leaderOnly, r)
			continue
		}
		g.goNamed(ctx, r)
	}
	m.log.Info("waiting for caches to sync")
	for _, inf := range informers {
		if err := inf.WaitForSync(ctx); err != nil {
			cancel(err)
			break
		}
	}
	if ctx.Err() == nil {
		lead := func(ctx context.Context) {
			m.log.Info("starting controllers and leader-only runnables")
			term := &group{cancel: cancel} // a failing runnable stops the Manager
			for _, r := range leaderOnly {
				term.goNamed(ctx, r)
			}
			term.wait()
		}
		if m.elect == nil {
			g.spawn(func() error { lead(ctx); return nil })
		} else {
			g.spawn(func() error { return m.elect(ctx, lead) })
		}
	}
	<-ctx.Done()
	m.log.Info("shutting down", "timeout", m.opts.ShutdownTimeout)
	err := g.wait()
	if cause := context.Cause(ctx); err == nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
		err = cause
	}
	return err
}

// group runs goroutines; the first error cancels the rest (a tiny errgroup).
type group struct {
	wg     sync.WaitGroup
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	err    error
}

func (g *group) spawn(fn func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := fn(); err != nil && !errors.Is(err, context.Canceled) {
			g.mu.Lock()
			if g.err == nil {
				g.err = err
			}
			g.mu.Unlock()
			g.cancel(err)
		}
	}()
}

func (g *group) goNamed(ctx context.Context, r Runnable) {
	g.spawn(func() error {
		if err := r.Run(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("kctl: runnable %q failed: %w", r.Name, err)
		}
		return nil
	})
}

func (g *group) wait() error {
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// syncer is what the Manager needs of an Informer[T] of any T.
type syncer interface {
	HasSynced() bool
	WaitForSync(ctx context.Context) error
	Err() error
}

// notSynced is the readiness check: nil once every informer has synced, else
// an error naming the first that has not and why (e.g. its CRD is not installed).
func notSynced(informers []syncer) error {
	for _, inf := range informers {
		if !inf.HasSynced() {
			if err := inf.Err(); err != nil {
				return err
			}
			return fmt.Errorf("kctl: %v has not synced yet", inf)
		}
	}
	return nil
}

// serve runs an HTTP server on addr until ctx ends.
func serve(ctx context.Context, name, addr string, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("kctl: %s server cannot listen on %s: %w", name, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	log.Info("serving "+name, "addr", ln.Addr().String())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("kctl: %s server on %s: %w", name, addr, err)
	}
	return nil
}

// SignalContext returns a context that ends on the first SIGINT or SIGTERM.
// A second signal exits the process at once with status 1: the one place kctl
// exits, because you asked for it by calling this.
func SignalContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ch
		cancel()
		<-ch
		os.Exit(1)
	}()
	return ctx
}

// LoggerFrom returns the logger kctl put in a reconcile's ctx (carrying
// controller, namespace, name and reconcileID), or slog.Default().
func LoggerFrom(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

type loggerKey struct{}

// writeTracker remembers, per object, the resourceVersion of the last write
// made through a Manager's clients, until the cache has caught up with it.
// It is how a reconcile reads its own writes.
type writeTracker struct {
	mu         sync.Mutex
	controlled map[string]bool     // resources that have a controller; only their writes are kept
	last       map[writeKey]string // resourceVersion written; removed by caughtUp
}

type writeKey struct{ resource, namespace, name string }

func newWriteTracker() *writeTracker {
	return &writeTracker{controlled: map[string]bool{}, last: map[writeKey]string{}}
}

// watch starts keeping writes of res: a controller of res will catch up on them.
func (w *writeTracker) watch(res Resource) {
	w.mu.Lock()
	w.controlled[res.String()] = true
	w.mu.Unlock()
}

func (w *writeTracker) record(res Resource, obj metav1.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.controlled[res.String()] {
		w.last[writeKey{res.String(), obj.GetNamespace(), obj.GetName()}] = obj.GetResourceVersion()
	}
}

// pending returns the resourceVersion the cache must reach before key is
// reconciled, or "".
func (w *writeTracker) pending(res Resource, k Key) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[writeKey{res.String(), k.Namespace, k.Name}]
}

// caughtUp forgets a write once the cache has seen resourceVersion rv (or newer) of key.
func (w *writeTracker) caughtUp(res Resource, k Key, rv string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wk := writeKey{res.String(), k.Namespace, k.Name}
	if want, ok := w.last[wk]; ok && !olderRV(rv, want) {
		delete(w.last, wk)
	}
}
