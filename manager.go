package kctl

// Manager: its Options, newManager, and what it makes and holds: the
// shared cache, ClientFor, the runnables (Add) and the probe checks
// (which server.go's AddReadyCheck and AddHealthCheck add to). Its
// controllers (NewController) are in manager_controllers.go; how it runs,
// in start.go.

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kctl-dev/kctl/internal/clusterconfig"
	"github.com/kctl-dev/kctl/internal/ctrlnames"
	"github.com/kctl-dev/kctl/internal/group"
	"github.com/kctl-dev/kctl/internal/health"
	"github.com/kctl-dev/kctl/internal/metrics"
	"github.com/kctl-dev/kctl/internal/misuse"
	"github.com/kctl-dev/kctl/internal/shutdown"
	"k8s.io/client-go/rest"
)

// namedController is what the Manager uses of a Controller[T] of any T.
type namedController interface {
	waitsFor() syncer
	runLed(ctx, leaseCtx context.Context) error
	runEverywhere(ctx context.Context) error
	busy() string
	logError(msg string)
	Enqueue(k Key)
}

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
// ServeSecureMetrics, ServeHealth, KeepHistory, ElectLeader, EventRecorder,
// and kctl/webhook's and kctl/debug's Serve functions. A program that does
// not call one does not link its code (the linker drops it), so it pays
// nothing for it.
type Manager struct {
	conn   *Conn
	config *rest.Config // as loaded; Config hands out copies
	cache  *Cache
	log    *slog.Logger
	opts   Options
	// writes hears of the writes of its ClientFor clients and its
	// controllers' own clients (see writeNotes): NewManager sets
	// read-your-writes' writeTracker (readyourwrites.go), which is also
	// the cache's read barrier; nil in newManager's Manager.
	writes writeNotes
	// metrics is the Manager's registry, which also counts the Conn's
	// requests; NewManager makes it (countInMetrics, constructors.go).
	metrics *metrics.Registry
	// health holds the probe checks; NewManager makes it with the
	// Manager's own (ping, and the controllers' caches: addOwnChecks).
	health *health.Checks
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
	// member, if set (Manager.Shard, before Start), is this replica as
	// a member of a shard group (shard_state.go's shardRun): every
	// controller then runs on every replica, and its workers skip the
	// keys member does not own (keyOwner). nil: every key is this
	// replica's. Fixed from Start on.
	member keyOwner

	// schedule is the graceful shutdown's schedule, fixed when Start's ctx ends.
	schedule *shutdown.Schedule

	// mu guards what follows. Before Start, everywhere and writers collect
	// what Start starts; from Start on, ctx is set and every runnable added
	// is started at once (leader-only ones in the current term, if any).
	// terms keeps the leader-only ones for every term.
	mu      sync.Mutex
	started bool
	// recorders, by component, hold recorder.go's *EventRecorder.
	recorders  map[string]any
	everywhere group.Pending // runnables of every replica
	terms      group.Terms   // leader-only runnables
	// writers are the Event writers: run on every replica, stopped after
	// the rest.
	writers group.Last
	// names holds, by controller name, what made it ("ConfigMap, made at
	// main.go:42"): a name is taken once per Manager.
	names ctrlnames.Taken
	// byName holds every controller registered, by name.
	byName map[string]namedController
	// observers makes the observer of each run of a controller
	// (controllerObserver): NewManager sets the metrics registry's
	// (metricsObservers, constructors.go) before it returns the
	// Manager, so it is never nil; history.go's KeepHistory wraps it, so
	// that each also keeps the controller's history.
	observers interface {
		observer(name string, workers int) controllerObserver
	}
	errs misuse.Errs // builder misuse, returned by Start

	// ctx is Start's (carrying the logger); nil before Start.
	ctx    context.Context
	cancel context.CancelCauseFunc // ends ctx
	// work runs the cache, runnables, the leader election or the leader
	// work.
	work *group.Group
}

// newManager loads the configuration (see LoadConfig), connects and makes
// the shared cache: floor 1's Manager. NewManager (constructors.go), its
// one caller, sets opts' defaults (Logger, ShutdownTimeout, the cache's
// Logger) and switches klog (KlogToLogger) around it, then puts floor 2's
// metrics and read-your-writes on its points (observers, the Conn's
// requests, writes, the cache's made hook and read barrier). It starts
// nothing: Start does.
func newManager(opts Options) (*Manager, error) {
	cfg := opts.Config
	if cfg == nil {
		var err error
		cfg, err = clusterconfig.Load(
			opts.Kubeconfig, opts.Context, opts.Logger)
		if err != nil {
			return nil, err
		}
	}
	conn, err := NewConn(cfg)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		conn:     conn,
		config:   rest.CopyConfig(cfg),
		log:      opts.Logger,
		opts:     opts,
		byName:   map[string]namedController{},
		schedule: &shutdown.Schedule{Timeout: opts.ShutdownTimeout},
	}
	conn.logWarningsTo(opts.Logger)
	m.cache = newCache(conn, opts.Cache)
	return m, nil
}

// Cache returns the Manager's shared cache, e.g. to scope one type before
// its first use:
//
//	kctl.ScopeFor[corev1.Secret](mgr.Cache(), kctl.Scope{Namespaces: []string{"app"}})
func (m *Manager) Cache() *Cache { return m.cache }

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
	c.cached = &cachedReads[*T]{
		client: &c.client,
		cache:  m.cache,
		informer: func() (*informer[*T], error) {
			return readInformer[T, PT](m.cache)
		},
	}
	c.notes = m.writes
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
	m.errs.Add(err, m.started, m.log) // logged as an error once started
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
		return shutdown.AddTooLate(r.Name) // it would never run
	case r.NeedLeader:
		m.terms.Add(r.inTerm)
	default:
		m.everywhere.Go(r.task())
	}
	return nil
}
