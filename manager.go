package kctl

// Manager: its Options, NewManager, and what it makes and holds: the
// shared cache, ClientFor, NewController, the runnables (Add) and the
// health checks. How it runs is in start.go.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/kctl-dev/kctl/internal/group"
	"github.com/kctl-dev/kctl/internal/metrics"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// Options configure a Manager. The zero value is ready to use.
type Options struct {
	// Kubeconfig is a kubeconfig path (a --kubeconfig flag). Defaults to
	// LoadConfig's search: $KUBECONFIG, the in-cluster service account,
	// then ~/.kube/config.
	Kubeconfig string
	// Context is the kubeconfig context to use (a --context flag), e.g.
	// "kind-dev"; one the kubeconfig lacks is an error listing those it
	// has. Defaults to the kubeconfig's current-context.
	Context string
	// Config, when set, is used as is; Kubeconfig and Context are ignored.
	Config *rest.Config
	// Logger receives every log line of the Manager and its parts: cache,
	// controllers, leader election, Events, metrics and health servers, and
	// runnables that log through LoggerFrom(ctx). Defaults to slog.Default().
	Logger *slog.Logger
	// KlogToLogger also sends klog's output (client-go's own log lines) to
	// Logger. klog is process-wide, so this changes it for the whole program
	// (the last Manager that asks wins). Defaults to false: klog is left as the
	// program set it up (stderr unless configured).
	KlogToLogger bool
	// ShutdownTimeout bounds the graceful shutdown: Start returns at most this
	// long after its context ends (see Start). Defaults to 30 s.
	ShutdownTimeout time.Duration
	// Cache configures the shared cache (per-type scopes, transforms).
	Cache CacheOptions
}

// Manager runs controllers and runnables over one connection and one shared
// cache. Make it with NewManager, add controllers (NewController) and
// runnables (Add), then call Start once. Controllers and runnables added
// after Start start at once, as those added before would (a leader-only one
// when this replica leads). Its methods are safe for concurrent use.
//
// The optional parts are turned on by a call before Start: ServeMetrics,
// ServeSecureMetrics, ServeHealth, ServeWebhooks, ServePprof, ServeDebug,
// KeepHistory, ElectLeader, EventRecorder. A program that does not call one
// does not link its code (the linker drops it), so it pays nothing for it.
type Manager struct {
	conn    *Conn
	config  *rest.Config // as loaded; Config hands out copies
	cache   *Cache
	log     *slog.Logger
	opts    Options
	writes  *writeTracker
	metrics *metrics.Registry
	health  *healthChecks
	// elect runs lead only while this replica holds the lease (see
	// ElectLeader); nil runs it at once. A func, not an *elector, so that
	// leader election is linked only into programs that call ElectLeader.
	elect func(
		ctx context.Context,
		lead func(leaderCtx, leaseCtx context.Context),
	) error

	// electBy names what set elect, "ElectLeader" or "Shard", for the
	// error of a second call.
	electBy string
	// ownsKey, if set (shard.go's Shard, before Start), reports whether
	// this replica owns key k now: every controller then runs on every
	// replica and its workers skip the keys it does not own
	// (controllerHost.owns). nil: every key is this replica's. Fixed from
	// Start on; it must be fast and safe for concurrent use.
	ownsKey func(k Key) bool
	// informerMade, if set (shard.go's Shard, before Start), sees every
	// informer of the cache, whole or metadata-only, as it is made and
	// before it runs, under the cache's lock (Cache.made).
	informerMade func(inf madeInformer)

	// shutdown is the schedule of the shutdown, fixed when Start's ctx ends.
	shutdown *shutdownSchedule

	// mu guards what follows. Before Start, runnables and leaderOnly collect
	// what Start starts; from Start on, ctx is set and every runnable added
	// is started at once (leader-only ones in the current term, if any) and
	// also kept in leaderOnly for the next terms.
	mu      sync.Mutex
	started bool
	// recorders, by component, hold recorder.go's *EventRecorder.
	recorders  map[string]any
	runnables  []Runnable // run on every replica
	leaderOnly []Runnable // run in every leadership term
	// eventWriters are the Event writers: run on every replica, stopped after
	// the rest.
	eventWriters []Runnable
	controllers  []interface{ unsynced() error }
	// names holds, by controller name, what made it ("ConfigMap, made at
	// main.go:42"): a name is taken once per Manager.
	names map[string]string
	// byName holds every controller registered, by name.
	byName map[string]namedController
	// history, if set, returns a controller's historian (history.go's
	// KeepHistory sets it); nil keeps no history.
	history func(name string) historian
	errs    []error // builder misuse, returned by Start

	// ctx is Start's (carrying the logger); nil before Start.
	ctx    context.Context
	cancel context.CancelCauseFunc // ends ctx
	// work runs the cache, runnables, the leader election or the leader
	// work.
	work *group.Group
	// eventCtx is the Event writers'; it ends after the work has.
	eventCtx   context.Context
	eventGroup *group.Group
	// term runs the current leadership term's runnables; nil while not
	// leading.
	term      *group.Group
	termCtx   context.Context // the current term's leader context
	termLease context.Context // and its lease context
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
		cfg, err = loadConfig(
			opts.Kubeconfig, opts.Context, opts.Logger)
		if err != nil {
			return nil, err
		}
	}
	conn, err := NewConn(cfg)
	if err != nil {
		return nil, err
	}
	if opts.KlogToLogger {
		// Process-wide: only when asked.
		klog.SetSlogLogger(opts.Logger)
	}
	if opts.Cache.Logger == nil {
		opts.Cache.Logger = opts.Logger
	}
	m := &Manager{
		conn:     conn,
		config:   rest.CopyConfig(cfg),
		log:      opts.Logger,
		opts:     opts,
		writes:   newWriteTracker(),
		metrics:  metrics.New(),
		health:   newHealthChecks(),
		names:    map[string]string{},
		byName:   map[string]namedController{},
		shutdown: &shutdownSchedule{timeout: opts.ShutdownTimeout},
	}
	conn.requests = m.metrics.Requests
	conn.logWarningsTo(opts.Logger)
	m.cache = NewCache(conn, opts.Cache)
	m.cache.made = func(inf madeInformer) {
		res := inf.resource().String()
		m.metrics.AddInformer(res, inf.Stats)
		m.metrics.AddUndecodable(res, inf.Undecodable)
		m.writes.track(inf)
		if m.informerMade != nil {
			m.informerMade(inf)
		}
	}
	m.cache.madeMetadata = func(inf madeInformer) {
		res := inf.resource().String()
		m.metrics.AddMetadataInformer(res, inf.Stats)
		if m.informerMade != nil {
			m.informerMade(inf)
		}
	}
	m.health.add("ping", false, func(*http.Request) error { return nil })
	return m, nil
}

// Config returns a copy of the Manager's rest.Config (Options.Config, or
// the one loaded from the kubeconfig), for code that needs a client of
// its own, e.g. a clientset or a discovery client:
//
//	cs, err := kubernetes.NewForConfig(mgr.Config())
//
// Changing the copy changes nothing in the Manager. It is the
// configuration as given: kctl's own defaults (user agent, rate limit)
// are set on its connection only.
func (m *Manager) Config() *rest.Config { return rest.CopyConfig(m.config) }

// Cache returns the Manager's shared cache, e.g. to scope one type before
// its first use:
//
//	kctl.ScopeFor[corev1.Secret](mgr.Cache(), kctl.Scope{Namespaces: []string{"app"}})
func (m *Manager) Cache() *Cache { return m.cache }

// NewController makes a controller named name that calls reconcile for every
// object of type T that changes, and for every key other sources enqueue.
// T is inferred from reconcile:
//
//	c := kctl.NewController(mgr, "podcount", func(ctx context.Context, rs *appsv1.ReplicaSet) (kctl.Result, error) { ... })
func NewController[T any, PT Object[T]](
	m *Manager,
	name string,
	reconcile func(ctx context.Context, obj *T) (Result, error),
) *Controller[T] {
	c := &Controller[T]{}
	c.setUp(m, name)
	c.reconcile = reconcile
	c.client = &NewClient[T, PT](m.conn).client
	c.ops = c.client.codec.ops
	res, err := ResourceOf[T]()
	var informer *Informer[T]
	if err == nil {
		c.res = res
		informer, err = InformerFor[T, PT](m.cache)
	}
	if err != nil {
		m.misuse(fmt.Errorf("kctl: controller %q: %w", name, unprefixed(err)))
		return c
	}
	c.watchOwn(&informer.informer, m.writes)
	m.register(&c.controller, name, res.Kind+", made at "+caller())
	return c
}

// watchOwn makes the changes of inf, the informer of the controller's own
// objects (of c.res), enqueue their keys, and has the finalizer writes of
// its client recorded by writes (read-your-writes).
func (c *controller[P]) watchOwn(inf *informer[P], writes *writeTracker) {
	c.informer = inf
	connect := func() { c.informer.addHandler(live(c.onEvent)) }
	c.connects = append(c.connects, connect)
	c.caches = append(c.caches, c.informer)
	c.client.afterWrite = func(obj metav1.Object) {
		writes.record(c.res, obj)
	}
	c.replays = append(c.replays, replay(c.informer, c.onEvent))
}

// setUp makes the parts of a new controller, named name, that do not
// depend on what it reconciles: its defaults, and its host m.
func (c *controller[P]) setUp(m *Manager, name string) {
	c.name = name
	c.workers = 1
	c.log = m.log.With("controller", name)
	c.triggers = map[Key]*Trigger{}
	c.later = map[Key]*Trigger{}
	c.deleted = map[Key]P{}
	c.kept = map[Key]Trigger{}
	c.active = map[Key]time.Time{}
	c.host = controllerHost{
		cache:           m.cache,
		writes:          m.writes,
		misuse:          m.misuse,
		add:             m.Add,
		drainBy:         m.shutdown.drainBy,
		shutdownTimeout: m.opts.ShutdownTimeout,
		observe: func(name string, workers int) controllerObserver {
			return m.metrics.Controller(name, workers)
		},
		history: m.historyOf,
		owns:    m.owns,
		sharded: m.sharded,
	}
}

// owns reports whether this replica owns key k now: always, unless the
// Manager is sharded (ownsKey).
func (m *Manager) owns(k Key) bool {
	if m.ownsKey == nil {
		return true
	}
	return m.ownsKey(k)
}

// sharded reports whether ownsKey is set (Shard).
func (m *Manager) sharded() bool { return m.ownsKey != nil }

// historyOf is the historian of controller name, or nil while the
// Manager keeps no history.
func (m *Manager) historyOf(name string) historian {
	m.mu.Lock()
	hook := m.history
	m.mu.Unlock()
	if hook == nil {
		return nil
	}
	return hook(name)
}

// namedController is what the Manager uses of a Controller[T] of any T.
type namedController interface {
	unsynced() error
	runLed(ctx, leaseCtx context.Context) error
	runEverywhere(ctx context.Context) error
	busy() string
	logError(msg string)
	Enqueue(k Key)
	stateOf(k Key) keyState
	inFlight(match func(k Key) bool) bool
	replayKeys()
}

// register adds controller c, named name, to the Manager, unless the
// name is taken; made says what made it, for that error.
func (m *Manager) register(
	c namedController,
	name string,
	made string,
) {
	// Two runnables: which one runs the controller is fixed when its
	// caches have synced (NeedLeader); the other then returns.
	runnable := Runnable{
		Name:       "controller " + name,
		NeedLeader: true,
		runTerm:    c.runLed,
		busy:       c.busy,
	}
	// Run is what runTerm does outside a term, whose lease never ends.
	runnable.Run = func(ctx context.Context) error {
		return c.runLed(ctx, context.WithoutCancel(ctx))
	}
	everywhere := Runnable{
		Name: "controller " + name + " (every replica)",
		Run:  c.runEverywhere,
		busy: c.busy,
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	first, taken := m.names[name]
	if taken {
		m.misuseLocked(fmt.Errorf("kctl: two controllers are named %q: "+
			"one of %s, and one of %s; "+
			"give each a name of its own "+
			"(metrics and logs are keyed by it)",
			name, first, made))
		return
	}
	m.names[name] = made
	m.byName[name] = c
	m.controllers = append(m.controllers, c)
	err := errors.Join(
		m.addLocked(runnable),
		m.addLocked(everywhere),
	)
	if err != nil {
		c.logError(err.Error())
	}
}

// caller names the file and line that called NewController, e.g.
// "main.go:42".
func caller() string {
	_, file, line, ok := runtime.Caller(2)
	if !ok {
		return "an unknown place"
	}
	return fmt.Sprintf("%s:%d", filepath.Base(file), line)
}

// ClientFor returns a client for T whose reads come from the manager's shared
// cache (as copies you may change) and whose writes go to the API server.
// The cache's informer for T starts on the first read. Use Uncached() on the
// result to read from the API server instead.
//
// Its reads see its writes, and those of every other ClientFor client and
// controller of the Manager: a cached Get of an object written, or a List of
// its namespace, waits until the cache holds the write, at most 10 s, then
// fails naming it. The details, and what is not covered, are in
// readyourwrites.go.
func ClientFor[T any, PT Object[T]](m *Manager) *Client[T] {
	c := NewClient[T, PT](m.conn)
	c.cached = cachedReads[T, PT]{
		client: c,
		cache:  m.cache,
		writes: m.writes,
	}
	res, err := ResourceOf[T]()
	if err != nil {
		return c // every call returns c.err
	}
	c.afterWrite = func(obj metav1.Object) {
		m.writes.record(res, obj)
	}
	c.afterDelete = func(namespace, name string, uid types.UID) {
		m.writes.recordDelete(res, namespace, name, uid)
	}
	return c
}

// misuse records a builder error; Start returns all of them. Once Start has
// begun it can return none, so a later mistake is logged as an error.
func (m *Manager) misuse(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.misuseLocked(err)
}

// misuseLocked is misuse with m.mu held.
func (m *Manager) misuseLocked(err error) {
	if m.started {
		m.log.Error(err.Error() +
			" (made after Manager.Start, so it is not returned by Start)")
		return
	}
	m.errs = append(m.errs, err)
}

// Add registers a runnable to start with the Manager. After Start it starts
// at once: one that needs leadership in the current leadership term (or the
// next, on a standby), and again in every later term. Add fails once the
// Manager is shutting down.
func (m *Manager) Add(r Runnable) error {
	if r.Run == nil {
		return fmt.Errorf("kctl: runnable %q has no Run function", r.Name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addLocked(r)
}

// addLocked is Add with m.mu held.
func (m *Manager) addLocked(r Runnable) error {
	switch {
	case m.ctx != nil && m.ctx.Err() != nil:
		return fmt.Errorf("kctl: Add(%q) after Start, "+
			"while the Manager shuts down: it would never run; "+
			"add it before the Manager's context ends", r.Name)
	case r.NeedLeader:
		m.leaderOnly = append(m.leaderOnly, r)
		if m.term != nil {
			runIn(m.term, m.termCtx, r.inTerm(m.termLease))
		}
	case m.ctx == nil:
		m.runnables = append(m.runnables, r)
	default:
		runIn(m.work, m.ctx, r)
	}
	return nil
}

// AddReadyCheck adds a check to /readyz: the replica is ready only while
// every ready check returns nil.
func (m *Manager) AddReadyCheck(
	name string,
	check func(r *http.Request) error,
) {
	m.health.add(name, true, check)
}

// AddHealthCheck adds a check to /healthz: a failing one makes the kubelet
// restart the container, so check only what a restart would fix.
func (m *Manager) AddHealthCheck(
	name string,
	check func(r *http.Request) error,
) {
	m.health.add(name, false, check)
}
