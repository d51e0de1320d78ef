// Package metrics is the registry behind a kctl Manager's metrics page:
// kctl's own series, written
// by internal/prom in the Prometheus text format 0.0.4. Names, labels,
// help texts and buckets are controller-runtime v0.22's, so its
// dashboards and alerts work unchanged:
//
//	controller_runtime_reconcile_total{controller,result}
//	  counter, result = error|requeue|requeue_after|success
//	controller_runtime_reconcile_errors_total{controller}  counter
//	controller_runtime_terminal_reconcile_errors_total{controller}
//	  counter, the errors that are not retried (also in errors_total)
//	controller_runtime_reconcile_panics_total{controller}  counter
//	controller_runtime_reconcile_timeouts_total{controller}  counter
//	controller_runtime_reconcile_time_seconds{controller}
//	  histogram, 0.005s .. 60s
//	controller_runtime_max_concurrent_reconciles{controller}  gauge
//	controller_runtime_active_workers{controller}
//	  gauge, the workers in a Reconcile
//	workqueue_depth{controller,name}  gauge
//	workqueue_unfinished_work_seconds{controller,name}  gauge
//	workqueue_longest_running_processor_seconds{controller,name}  gauge
//	workqueue_{adds,retries}_total{controller,name}  counters
//	workqueue_{queue,work}_duration_seconds{controller,name}
//	  histograms, 1e-8s .. 1000s
//	leader_election_master_status{name}  gauge, 1 while leading
//	controller_runtime_webhook_* (kctl/webhook registers them as the
//	  program's own metrics, User)
//
// and kctl's own:
//
//	kctl_cache_{objects,bytes}{resource}
//	  gauges, per informer of the Manager's cache; bytes is the
//	  encoded size, not memory
//	kctl_cache_undecodable_objects{resource}
//	  gauge, per informer of the Manager's cache
//	kctl_cache_metadata_{objects,bytes}{resource}
//	  gauges, per metadata-only informer (OwnsMetadata,
//	  MetadataInformerFor): it may run beside a whole one
//	kctl_events_dropped_total
//	  counter, once an EventRecorder is made
//	kctl_reconcile_conflicts_total{controller}
//	  counter: Conflicts retried quietly
//
// Both workqueue labels are the controller's name, as in
// controller-runtime. The page also has the go_* and process_* series of
// the Prometheus Go client's collectors (internal/prom), client-go's
// rest_client_* series for kctl's requests (requests.go) and the
// program's own (kctl's user_metrics.go).
package metrics

import (
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kctl-dev/kctl/internal/prom"
)

// reconcileBuckets are controller-runtime's buckets for
// reconcile_time_seconds.
var reconcileBuckets = []float64{
	0.005, 0.01, 0.025, 0.05, 0.1,
	0.15, 0.2, 0.25, 0.3, 0.35,
	0.4, 0.45, 0.5, 0.6, 0.7,
	0.8, 0.9, 1, 1.25, 1.5,
	1.75, 2, 2.5, 3, 3.5,
	4, 4.5, 5, 6, 7,
	8, 9, 10, 15, 20,
	25, 30, 40, 50, 60,
}

// workqueueBuckets are controller-runtime's,
// prometheus.ExponentialBuckets(10e-9, 10, 12), whose repeated
// multiplication gives these le labels.
var workqueueBuckets = []float64{
	1e-08, 1e-07, 1e-06,
	9.999999999999999e-06,
	9.999999999999999e-05,
	0.001, 0.01, 0.1,
	1, 10, 100, 1000,
}

// Registry is the registry behind one Manager's metrics page:
//
//	m := metrics.New()
//	cm := m.Controller("widgets", 2) // cm is its QueueObserver too
//	cm.Reconciled("success", took)      // after each Reconcile
//	http.Handle("/metrics", m.Handler())
//
// The zero value is not usable; call New. It is safe for
// concurrent use. The functions read at scrape time (queue depth, cache
// stats) run without mu held.
type Registry struct {
	mu          sync.Mutex
	controllers map[string]*Controller
	// informers are the caches' stats, by resource.
	informers map[string]func() (objects int, bytes int64)
	// metadata are the stats of the metadata-only informers, by
	// resource.
	metadata map[string]func() (objects int, bytes int64)
	// leaders say whether this process leads, by lease name.
	leaders map[string]bool
	// events counts the Events the recorders did not write; nil
	// before the first recorder.
	events *atomic.Uint64
	// undecodable are the caches' counts, by resource.
	undecodable map[string]func() int
	// shards are the shard groups' series (shard.go); nil until the
	// first.
	shards map[string]*Shard
	// Requests are the Manager's Conn's; never nil.
	Requests *Requests
	// User are the program's own metrics (kctl's user_metrics.go).
	User prom.Registry
}

// New returns a Registry with no series but the Go, process and request ones.
func New() *Registry {
	return &Registry{
		controllers: map[string]*Controller{},
		informers:   map[string]func() (int, int64){},
		metadata:    map[string]func() (int, int64){},
		leaders:     map[string]bool{},
		undecodable: map[string]func() int{},
		Requests:    newRequests(),
	}
}

// Controller returns the named controller's metrics, creating them
// (every series at zero) on first use, and sets
// max_concurrent_reconciles to workers.
func (m *Registry) Controller(
	name string,
	workers int,
) *Controller {
	m.mu.Lock()
	defer m.mu.Unlock()
	cm := m.controllers[name]
	if cm == nil {
		cm = newController(name)
		m.controllers[name] = cm
	}
	cm.maxWorkers.Store(int64(workers))
	return cm
}

// AddInformer shows stats, called at every scrape, as kctl_cache_objects
// and kctl_cache_bytes{resource}; a second call for a resource replaces
// the first.
func (m *Registry) AddInformer(
	resource string,
	stats func() (objects int, bytes int64),
) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.informers[resource] = stats
}

// AddMetadataInformer shows stats of a metadata-only informer, called at
// every scrape, as kctl_cache_metadata_objects and
// kctl_cache_metadata_bytes{resource}.
func (m *Registry) AddMetadataInformer(
	resource string,
	stats func() (objects int, bytes int64),
) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.metadata[resource] = stats
}

// EventsDropped returns the counter of Events not written that every
// EventRecorder of the Manager adds to, shown from the first call on.
func (m *Registry) EventsDropped() *atomic.Uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.events == nil {
		m.events = new(atomic.Uint64)
	}
	return m.events
}

// AddUndecodable shows count, called at every scrape, as
// kctl_cache_undecodable_objects{resource}.
func (m *Registry) AddUndecodable(resource string, count func() int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.undecodable[resource] = count
}

// SetLeader records whether this process holds the named lease.
func (m *Registry) SetLeader(lease string, leading bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leaders[lease] = leading
}

// Handler serves the page, a fresh snapshot, sorted so that it is stable.
func (m *Registry) Handler() http.Handler {
	return prom.Handler(m.Page)
}

// Page collects every series. The functions registered to be read at
// scrape time run after m.mu is released.
func (m *Registry) Page() *prom.Page {
	m.mu.Lock()
	cms := slices.Collect(maps.Values(m.controllers))
	informers := maps.Clone(m.informers)
	metadata := maps.Clone(m.metadata)
	leaders := maps.Clone(m.leaders)
	events := m.events
	undecodable := maps.Clone(m.undecodable)
	shards := slices.Collect(maps.Values(m.shards))
	m.mu.Unlock()
	p := &prom.Page{}
	if events != nil {
		p.Counter("kctl_events_dropped_total",
			"Number of Events recorded and never "+
				"written (buffer full, write failed, "+
				"shutdown).",
			float64(events.Load()))
	}
	for _, cm := range cms {
		cm.collect(p)
	}
	for r, stats := range informers {
		collectInformer(p, "kctl_cache", r, stats)
	}
	for r, stats := range metadata {
		collectInformer(p, "kctl_cache_metadata", r, stats)
	}
	for r, count := range undecodable {
		p.Gauge("kctl_cache_undecodable_objects",
			"Number of objects per resource that "+
				"exist on the server but do not "+
				"decode into the Go type (the cache "+
				"keeps their last good copy).",
			float64(count()), "resource", r)
	}
	for lease, leading := range leaders {
		collectLeader(p, lease, leading)
	}
	for _, s := range shards {
		s.collect(p)
	}
	prom.CollectGoRuntime(p)
	prom.CollectProcess(p)
	m.Requests.collect(p)
	m.User.Collect(p)
	return p
}

// collectInformer adds the prefix_objects and prefix_bytes series of
// one informer.
func collectInformer(
	p *prom.Page,
	prefix, resource string,
	stats func() (int, int64),
) {
	objects, bytes := stats()
	p.Gauge(prefix+"_objects",
		"Number of objects in the informer's cache "+
			"per resource.",
		float64(objects), "resource", resource)
	p.Gauge(prefix+"_bytes",
		"Encoded size in bytes (protobuf or JSON) of "+
			"the objects in the informer's cache per "+
			"resource; not the memory they take, "+
			"which decoding raises and sharing equal "+
			"parts lowers.",
		float64(bytes), "resource", resource)
}

// collectLeader adds the leader_election_master_status of one lease.
func collectLeader(p *prom.Page, lease string, leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	p.Gauge("leader_election_master_status",
		"Gauge of if the reporting system is master "+
			"of the relevant lease, 0 indicates "+
			"backup, 1 indicates master. 'name' is "+
			"the string used to identify the lease. "+
			"Please make sure to group by name.",
		v, "name", lease)
}

// Controller are one controller's series and its queue's
// QueueObserver. It is safe for concurrent use; reconciled, the worker
// brackets and the observer methods take no lock.
type Controller struct {
	name       string
	maxWorkers atomic.Int64
	// active counts the workers in a Reconcile now: 0 on an idle
	// controller, at most maxWorkers.
	active    atomic.Int64
	adds      atomic.Uint64
	retries   atomic.Uint64
	conflicts atomic.Uint64
	timeouts  atomic.Uint64
	// panics counts the Reconciles that panicked; terminal those
	// that returned a Terminal error. Both are also counted by their
	// result, "error".
	panics   atomic.Uint64
	terminal atomic.Uint64
	// notOwned counts keys skipped by a shard member that does not
	// own them.
	notOwned atomic.Uint64
	// results count Reconciles by result label; it holds
	// *atomic.Uint64 values, and always "error", "requeue",
	// "requeue_after" and "success".
	results       sync.Map
	reconcileTime *prom.Histogram
	queueDuration *prom.Histogram
	workDuration  *prom.Histogram

	mu       sync.Mutex // guards depth and inFlight
	depth    func() int
	inFlight func() (n int, unfinished, longest time.Duration)
}

func newController(name string) *Controller {
	cm := &Controller{
		name:          name,
		reconcileTime: prom.NewHistogram(reconcileBuckets),
		queueDuration: prom.NewHistogram(workqueueBuckets),
		workDuration:  prom.NewHistogram(workqueueBuckets),
	}
	results := []string{
		"error", "requeue", "requeue_after", "success",
	}
	for _, result := range results {
		cm.results.Store(result, new(atomic.Uint64))
	}
	return cm
}

// Reconciled counts one Reconcile call and its duration. result is
// "success", "error" (also counted in reconcile_errors_total), "requeue"
// or "requeue_after"; any other value gets a series of its own, keeping
// the caller's mistake visible.
func (cm *Controller) Reconciled(
	result string,
	took time.Duration,
) {
	cm.reconcileTime.Observe(took.Seconds())
	n, ok := cm.results.Load(result)
	if !ok {
		zero := new(atomic.Uint64)
		n, _ = cm.results.LoadOrStore(result, zero)
	}
	n.(*atomic.Uint64).Add(1)
}

// Conflicted counts a reconcile that returned a Conflict (its copy of an
// object was stale): kctl_reconcile_conflicts_total, and reconcile_total
// with result "requeue", as it is retried without counting as an error.
func (cm *Controller) Conflicted(took time.Duration) {
	cm.conflicts.Add(1)
	cm.Reconciled("requeue", took)
}

// TimedOut counts a Reconcile that ran past its controller's timeout:
// controller_runtime_reconcile_timeouts_total. Its result is counted by
// Reconciled as well.
func (cm *Controller) TimedOut() { cm.timeouts.Add(1) }

// Panicked counts a Reconcile that panicked:
// controller_runtime_reconcile_panics_total. Its result, an error, is
// counted by Reconciled as well.
func (cm *Controller) Panicked() { cm.panics.Add(1) }

// FailedTerminally counts a Reconcile that returned a Terminal error,
// which is not retried: controller_runtime_terminal_reconcile_errors_total.
// Its result, an error, is counted by Reconciled as well.
func (cm *Controller) FailedTerminally() { cm.terminal.Add(1) }

// WorkerStarted and WorkerStopped bracket each Reconcile call: call
// WorkerStarted right before it and WorkerStopped right after, so that
// controller_runtime_active_workers counts the workers busy in one, as
// controller-runtime's does (0 on an idle controller).
func (cm *Controller) WorkerStarted() { cm.active.Add(1) }

func (cm *Controller) WorkerStopped() { cm.active.Add(-1) }

// SetQueue registers the queue's read-outs, called at scrape time for
// workqueue_depth, _unfinished_work_seconds and
// _longest_running_processor_seconds.
func (cm *Controller) SetQueue(
	depth func() int,
	inFlight func() (n int, unfinished, longest time.Duration),
) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	cm.depth = depth
	cm.inFlight = inFlight
}

// Added, Waited, Worked and Retried implement QueueObserver.
func (cm *Controller) Added() { cm.adds.Add(1) }

func (cm *Controller) Waited(d time.Duration) {
	cm.queueDuration.Observe(d.Seconds())
}

func (cm *Controller) Worked(d time.Duration) {
	cm.workDuration.Observe(d.Seconds())
}

func (cm *Controller) Retried() { cm.retries.Add(1) }

// collect adds the controller's series, then its queue's.
func (cm *Controller) collect(p *prom.Page) {
	c := []string{"controller", cm.name}
	for result, n := range cm.results.Range {
		v := float64(n.(*atomic.Uint64).Load())
		p.Counter("controller_runtime_reconcile_total",
			"Total number of reconciliations per "+
				"controller",
			v, "controller", cm.name, "result", result.(string))
	}
	errs, _ := cm.results.Load("error")
	p.Counter("controller_runtime_reconcile_errors_total",
		"Total number of reconciliation errors per "+
			"controller",
		float64(errs.(*atomic.Uint64).Load()), c...)
	p.Counter("controller_runtime_terminal_reconcile_errors_total",
		"Total number of terminal reconciliation errors "+
			"per controller",
		float64(cm.terminal.Load()), c...)
	p.Counter("controller_runtime_reconcile_panics_total",
		"Total number of reconciliation panics per "+
			"controller",
		float64(cm.panics.Load()), c...)
	p.Counter("controller_runtime_reconcile_timeouts_total",
		"Total number of reconciliation timeouts per "+
			"controller",
		float64(cm.timeouts.Load()), c...)
	p.Histogram("controller_runtime_reconcile_time_seconds",
		"Length of time per reconciliation per "+
			"controller",
		cm.reconcileTime, c...)
	p.Gauge("controller_runtime_max_concurrent_reconciles",
		"Maximum number of concurrent reconciles per "+
			"controller",
		float64(cm.maxWorkers.Load()), c...)
	p.Gauge("controller_runtime_active_workers",
		"Number of currently used workers per "+
			"controller",
		float64(cm.active.Load()), c...)
	p.Counter("kctl_reconcile_conflicts_total",
		"Total number of reconciliations per "+
			"controller that returned a Conflict (a "+
			"write from a stale copy) and were "+
			"retried without counting as an error",
		float64(cm.conflicts.Load()), c...)
	cm.collectSkipped(p)
	cm.collectQueue(p)
}

// collectQueue adds the workqueue_* series.
func (cm *Controller) collectQueue(p *prom.Page) {
	cm.mu.Lock()
	depth := cm.depth
	inFlight := cm.inFlight
	cm.mu.Unlock()
	q := []string{"controller", cm.name, "name", cm.name}
	p.Counter("workqueue_adds_total",
		"Total number of adds handled by workqueue",
		float64(cm.adds.Load()), q...)
	p.Counter("workqueue_retries_total",
		"Total number of retries handled by workqueue",
		float64(cm.retries.Load()), q...)
	p.Histogram("workqueue_queue_duration_seconds",
		"How long in seconds an item stays in "+
			"workqueue before being requested",
		cm.queueDuration, q...)
	p.Histogram("workqueue_work_duration_seconds",
		"How long in seconds processing an item from "+
			"workqueue takes.",
		cm.workDuration, q...)
	if depth != nil {
		p.Gauge("workqueue_depth",
			"Current depth of workqueue by workqueue "+
				"and priority",
			float64(depth()), q...)
	}
	if inFlight == nil {
		return
	}
	_, unfinished, longest := inFlight()
	p.Gauge("workqueue_unfinished_work_seconds",
		"How many seconds of work has been done that "+
			"is in progress and hasn't been observed "+
			"by work_duration. Large values indicate "+
			"stuck threads. One can deduce the "+
			"number of stuck threads by observing "+
			"the rate at which this increases.",
		unfinished.Seconds(), q...)
	p.Gauge("workqueue_longest_running_processor_seconds",
		"How many seconds has the longest running "+
			"processor for workqueue been running.",
		longest.Seconds(), q...)
}
