package kctl

// Floor 2's last file: NewManager and NewCache, floor 1's Manager
// (newManager) and Cache (newCache) with the production behaviours that
// are on by default put on their points; the Manager's own metrics and
// probe checks are here too, since NewManager is what switches them on;
// Manager.Config, the configuration NewManager loaded; SignalContext, the
// context a program's main starts the Manager with.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/kctl-dev/kctl/internal/health"
	"github.com/kctl-dev/kctl/internal/metrics"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// NewManager loads the configuration (see LoadConfig), connects and makes
// the shared cache. It starts nothing: Start does.
func NewManager(opts Options) (*Manager, error) {
	// Its Manager is floor 1's (newManager, manager.go) with
	//   - its metrics (below): each informer and reconcile is counted on
	//     the metrics page;
	//   - read your writes (readyourwrites.go): one writeTracker hears of the
	//     writes of its clients (writeNotes), holds back cached reads and
	//     reconciles until the cache has them (the cache's read barrier), and
	//     follows every whole informer the cache makes;
	//   - the watch-list stream (watch_list.go) and the resync
	//     (cache_options.go): every informer syncs with the one and
	//     resyncs as configured, as NewCache's do;
	//   - its own probe checks (addOwnChecks, below): /healthz's ping,
	//     and /readyz's caches, which waits for every controller's caches.
	//
	// The first three see each informer through the cache's made hook (which a
	// shard member's Manager.Shard wraps).
	opts = opts.withDefaults()
	m, err := newManager(opts)
	if err != nil {
		return nil, err
	}
	if opts.KlogToLogger {
		// Process-wide: only when asked.
		klog.SetSlogLogger(opts.Logger)
	}
	m.countInMetrics()
	m.addOwnChecks()
	tracker := newWriteTracker()
	m.writes = tracker
	m.cache.barrier = tracker
	m.cache.made = func(inf cachedInformer) {
		meta := isMetadata(inf)
		m.countInformer(inf, meta)
		if !meta {
			tracker.track(inf)
		}
		streamByWatchList(inf)
		m.cache.resyncBy(inf)
	}
	return m, nil
}

// withDefaults is opts with the defaults its fields' docs state: Logger
// slog.Default(), ShutdownTimeout 30 s, and the cache's Logger Logger.
func (opts Options) withDefaults() Options {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 30 * time.Second
	}
	if opts.Cache.Logger == nil {
		opts.Cache.Logger = opts.Logger
	}
	return opts
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

// addOwnChecks makes m.health, the Manager's probe checks, with its own:
// "ping" to /healthz, and "caches" to /readyz (notReady). NewManager
// calls it.
func (m *Manager) addOwnChecks() {
	m.health = &health.Checks{}
	m.health.Add("ping", false, func(*http.Request) error { return nil })
	m.health.Add("caches", true, m.notReady)
}

// notReady is the readiness check of the controllers' caches: nil once every
// controller's caches have synced, else an error naming each controller that
// waits, by name, for which cache and why (e.g. its CRD is not installed).
func (m *Manager) notReady(*http.Request) error {
	m.mu.Lock()
	controllers := maps.Clone(m.byName)
	m.mu.Unlock()
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(controllers)) {
		inf := controllers[name].waitsFor()
		if inf == nil {
			continue
		}
		why := inf.Err()
		if why == nil {
			why = errors.New("not synced yet")
		}
		errs = append(errs, fmt.Errorf("kctl: controller %q waits for its %v: %w", name, inf, why))
	}
	return errors.Join(errs...)
}

// NewCache returns a Cache reading through conn. It starts nothing.
func NewCache(conn *Conn, opts CacheOptions) *Cache {
	// Its Cache is floor 1's (newCache, cache.go) whose informers sync
	// with the watch-list stream (watch_list.go) and resync as configured
	// (cache_options.go), through the made hook.
	c := newCache(conn, opts)
	c.made = func(inf cachedInformer) {
		streamByWatchList(inf)
		c.resyncBy(inf)
	}
	return c
}

// The Manager's own metrics (internal/metrics): each informer of its
// cache and each reconcile of its controllers, counted on the metrics
// page (ServeMetrics) through floor 1's points, the Cache's made hook
// and the Manager's observers hook, and each request of its connection
// (the Conn's requests).

// countInMetrics makes m.metrics, the Manager's registry, and puts it on
// m's observers hook and its Conn's requests; NewManager calls it.
func (m *Manager) countInMetrics() {
	m.metrics = metrics.New()
	m.conn.requests = m.metrics.Requests
	m.observers = metricsObservers{m.metrics}
}

// countedInformer is what the metrics page reads of an informer: every
// Informer[T] and its core have these methods (informer_more.go).
type countedInformer interface {
	cachedInformer
	Stats() (objects int, bytes int64)
	Undecodable() int
}

// countInformer adds inf's series (objects, bytes, undecodable objects)
// to the metrics page: called by the Cache's made hook. Every informer a
// Cache makes is counted; one that could not be is skipped.
func (m *Manager) countInformer(made cachedInformer, meta bool) {
	inf, ok := made.(countedInformer)
	if !ok {
		return
	}
	res := inf.resource().String()
	if meta {
		m.metrics.AddMetadataInformer(res, inf.Stats)
		return
	}
	m.metrics.AddInformer(res, inf.Stats)
	m.metrics.AddUndecodable(res, inf.Undecodable)
}

// metricsObservers is what the observers hook holds by default: each
// controller's metrics series (internal/metrics), and no history.
type metricsObservers struct{ reg *metrics.Registry }

func (o metricsObservers) observer(name string, workers int) controllerObserver {
	return metricsObserver{o.reg.Controller(name, workers)}
}

// metricsObserver is a controller's metrics series as its observer.
type metricsObserver struct{ *metrics.Controller }

// reconciled counts a reconcile by what the reconcile contract makes
// of it (outcomeOf).
func (o metricsObserver) reconciled(_ Key, t Trigger, _ time.Time, took time.Duration, res Result, err error) {
	switch outcomeOf(t, res, err) {
	case outcomeTerminal:
		o.FailedTerminally()
		o.Reconciled("error", took)
	case outcomeConflict:
		o.Conflicted(took)
	case outcomeError, outcomeTimeout:
		o.Reconciled("error", took)
	case outcomeRequeueAfter:
		o.Reconciled("requeue_after", took)
	default:
		o.Reconciled("success", took)
	}
}

// dropped does nothing: no metric counts dropped events.
func (metricsObserver) dropped(Key, string) {}

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
