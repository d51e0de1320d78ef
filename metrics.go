package kctl

import (
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// This file serves the Manager's metrics page in the Prometheus text format
// 0.0.4, written by hand. Names, labels, help texts and buckets are
// controller-runtime v0.22's, so its dashboards and alerts work unchanged:
//
//	controller_runtime_reconcile_total{controller,result}   counter, result = error|requeue|requeue_after|success
//	controller_runtime_reconcile_errors_total{controller}   counter
//	controller_runtime_reconcile_time_seconds{controller}   histogram, 0.005s .. 60s
//	controller_runtime_{max_concurrent_reconciles,active_workers}{controller}  gauges
//	workqueue_{depth,unfinished_work_seconds,longest_running_processor_seconds}{controller,name}  gauges
//	workqueue_{adds,retries}_total{controller,name}         counters
//	workqueue_{queue,work}_duration_seconds{controller,name} histograms, 1e-8s .. 1000s
//	leader_election_master_status{name}                     gauge, 1 while leading
//	kctl_cache_{objects,bytes}{resource}                    gauges (kctl's own), per informer of the Manager's cache; bytes is the encoded size, not memory
//	kctl_events_dropped_total                               counter (kctl's own), once an EventRecorder is made
//	kctl_cache_undecodable_objects{resource}                gauge (kctl's own), per informer of the Manager's cache
//	kctl_reconcile_conflicts_total{controller}              counter (kctl's own): Conflicts retried quietly
//
// Both workqueue labels are the controller's name, as in controller-runtime.
// The hot path (reconciled and the QueueObserver methods) takes no lock.

// reconcileBuckets are controller-runtime's buckets for reconcile_time_seconds.
var reconcileBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
	0.6, 0.7, 0.8, 0.9, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60}

// workqueueBuckets are controller-runtime's, prometheus.ExponentialBuckets(10e-9, 10, 12),
// whose repeated multiplication gives these le labels.
var workqueueBuckets = []float64{1e-08, 1e-07, 1e-06, 9.999999999999999e-06, 9.999999999999999e-05, 0.001, 0.01, 0.1, 1, 10, 100, 1000}

// The page also has the go_* and process_* series of the Prometheus Go
// client's collectors (runtime_metrics.go, process_metrics.go), client-go's
// rest_client_* series for kctl's requests (request_metrics.go) and the
// program's own (user_metrics.go).

// metrics is the registry behind one Manager's metrics page:
//
//	m := newMetrics()
//	cm := m.forController("widgets", 2) // once per controller; cm is its QueueObserver too
//	cm.reconciled("success", took)      // after each Reconcile
//	http.Handle("/metrics", m.handler())
//
// The zero value is not usable; call newMetrics. It is safe for concurrent
// use. Functions read at scrape time (queue depth, cache stats) run without m.mu held.
type metrics struct {
	mu          sync.Mutex
	controllers map[string]*controllerMetrics
	informers   map[string]func() (objects int, bytes int64) // by resource
	leaders     map[string]bool                              // by lease name
	events      *atomic.Uint64                               // Events not written by the recorders; nil before the first
	undecodable map[string]func() int                        // by resource
	requests    *requestMetrics                              // the Manager's Conn's; never nil
	user        *Metrics                                     // the program's own; never nil
}

func newMetrics() *metrics {
	return &metrics{controllers: map[string]*controllerMetrics{}, informers: map[string]func() (int, int64){}, leaders: map[string]bool{},
		undecodable: map[string]func() int{}, requests: newRequestMetrics(), user: newUserMetrics()}
}

// forController returns the named controller's metrics, creating them (every
// series at zero) on first use, and sets max_concurrent_reconciles to workers.
func (m *metrics) forController(name string, workers int) *controllerMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	cm := m.controllers[name]
	if cm == nil {
		cm = &controllerMetrics{name: name, reconcileTime: newHistogram(reconcileBuckets),
			queueDuration: newHistogram(workqueueBuckets), workDuration: newHistogram(workqueueBuckets)}
		for _, result := range []string{"error", "requeue", "requeue_after", "success"} {
			cm.results.Store(result, new(atomic.Uint64))
		}
		m.controllers[name] = cm
	}
	cm.maxWorkers.Store(int64(workers))
	return cm
}

// addInformer shows stats, called at every scrape, as kctl_cache_objects and
// kctl_cache_bytes{resource}; a second call for a resource replaces the first.
func (m *metrics) addInformer(resource string, stats func() (objects int, bytes int64)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.informers[resource] = stats
}

// eventsDropped returns the counter of Events not written that every
// EventRecorder of the Manager adds to, shown from the first call on.
func (m *metrics) eventsDropped() *atomic.Uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.events == nil {
		m.events = new(atomic.Uint64)
	}
	return m.events
}

// addUndecodable shows count, called at every scrape, as
// kctl_cache_undecodable_objects{resource}.
func (m *metrics) addUndecodable(resource string, count func() int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.undecodable[resource] = count
}

// setLeader records whether this process holds the named lease.
func (m *metrics) setLeader(lease string, leading bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leaders[lease] = leading
}

// handler serves the page, a fresh snapshot sorted so that it is stable.
func (m *metrics) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		m.page().writeTo(w)
	})
}

// page collects every series; registered functions run after m.mu is released.
func (m *metrics) page() page {
	p := m.ownPage()
	collectGoRuntime(p)
	collectProcess(p)
	m.requests.collect(p)
	m.user.collect(p)
	return p
}

// ownPage collects the series of kctl's controllers, caches and leases.
func (m *metrics) ownPage() page {
	m.mu.Lock()
	cms := slices.Collect(maps.Values(m.controllers))
	informers := maps.Clone(m.informers)
	leaders := maps.Clone(m.leaders)
	events := m.events
	undecodable := maps.Clone(m.undecodable)
	m.mu.Unlock()
	p := page{}
	if events != nil {
		p.counter("kctl_events_dropped_total", "Number of Events recorded and never written (buffer full, write failed, shutdown).", float64(events.Load()))
	}
	for _, cm := range cms {
		cm.collect(p)
	}
	for r, stats := range informers {
		objects, bytes := stats()
		p.gauge("kctl_cache_objects", "Number of objects in the informer's cache per resource.", float64(objects), "resource", r)
		p.gauge("kctl_cache_bytes", "Encoded size in bytes (protobuf or JSON) of the objects in the informer's cache per resource; not the memory they take, which decoding raises and sharing equal parts lowers.", float64(bytes), "resource", r)
	}
	for r, count := range undecodable {
		p.gauge("kctl_cache_undecodable_objects", "Number of objects per resource that exist on the server but do not decode into the Go type (the cache keeps their last good copy).",
			float64(count()), "resource", r)
	}
	for l, leading := range leaders {
		v := 0.0
		if leading {
			v = 1
		}
		p.gauge("leader_election_master_status", "Gauge of if the reporting system is master of the relevant lease, "+
			"0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
			v, "name", l)
	}
	return p
}

// controllerMetrics are one controller's series and its queue's QueueObserver.
// It is safe for concurrent use; reconciled and the observer methods are lock-free.
type controllerMetrics struct {
	name                                       string
	maxWorkers, active                         atomic.Int64
	adds, retries, conflicts                   atomic.Uint64
	results                                    sync.Map // result label -> *atomic.Uint64
	reconcileTime, queueDuration, workDuration *histogram

	mu       sync.Mutex // guards depth and inFlight
	depth    func() int
	inFlight func() (n int, unfinished, longest time.Duration)
}

// reconciled counts one Reconcile call and its duration. result is "success",
// "error" (also counted in reconcile_errors_total), "requeue" or "requeue_after";
// any other value gets a series of its own, keeping the caller's mistake visible.
func (cm *controllerMetrics) reconciled(result string, took time.Duration) {
	cm.reconcileTime.observe(took.Seconds())
	n, ok := cm.results.Load(result)
	if !ok {
		n, _ = cm.results.LoadOrStore(result, new(atomic.Uint64))
	}
	n.(*atomic.Uint64).Add(1)
}

// conflicted counts a reconcile that returned a Conflict (its copy of an
// object was stale): kctl_reconcile_conflicts_total, and reconcile_total
// with result "requeue", as it is retried without counting as an error.
func (cm *controllerMetrics) conflicted(took time.Duration) {
	cm.conflicts.Add(1)
	cm.reconciled("requeue", took)
}

// workerStarted and workerStopped bracket each Reconcile call for
// controller_runtime_active_workers.
func (cm *controllerMetrics) workerStarted() { cm.active.Add(1) }

func (cm *controllerMetrics) workerStopped() { cm.active.Add(-1) }

// setQueue registers the queue's read-outs, called at scrape time for
// workqueue_depth, _unfinished_work_seconds and _longest_running_processor_seconds.
func (cm *controllerMetrics) setQueue(depth func() int, inFlight func() (n int, unfinished, longest time.Duration)) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	cm.depth = depth
	cm.inFlight = inFlight
}

// Added, Waited, Worked and Retried implement QueueObserver.
func (cm *controllerMetrics) Added() { cm.adds.Add(1) }

func (cm *controllerMetrics) Waited(d time.Duration) { cm.queueDuration.observe(d.Seconds()) }

func (cm *controllerMetrics) Worked(d time.Duration) { cm.workDuration.observe(d.Seconds()) }

func (cm *controllerMetrics) Retried() { cm.retries.Add(1) }

func (cm *controllerMetrics) collect(p page) {
	cm.mu.Lock()
	depth := cm.depth
	inFlight := cm.inFlight
	cm.mu.Unlock()
	c := cm.name
	q := []string{"controller", cm.name, "name", cm.name}
	for result, n := range cm.results.Range {
		p.counter("controller_runtime_reconcile_total", "Total number of reconciliations per controller",
			float64(n.(*atomic.Uint64).Load()), "controller", c, "result", result.(string))
	}
	errs, _ := cm.results.Load("error")
	p.counter("controller_runtime_reconcile_errors_total", "Total number of reconciliation errors per controller",
		float64(errs.(*atomic.Uint64).Load()), "controller", c)
	p.histogram("controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per controller",
		cm.reconcileTime, "controller", c)
	p.gauge("controller_runtime_max_concurrent_reconciles", "Maximum number of concurrent reconciles per controller",
		float64(cm.maxWorkers.Load()), "controller", c)
	p.gauge("controller_runtime_active_workers", "Number of currently used workers per controller",
		float64(cm.active.Load()), "controller", c)
	p.counter("kctl_reconcile_conflicts_total", "Total number of reconciliations per controller that returned a Conflict "+
		"(a write from a stale copy) and were retried without counting as an error", float64(cm.conflicts.Load()), "controller", c)
	p.counter("workqueue_adds_total", "Total number of adds handled by workqueue", float64(cm.adds.Load()), q...)
	p.counter("workqueue_retries_total", "Total number of retries handled by workqueue", float64(cm.retries.Load()), q...)
	p.histogram("workqueue_queue_duration_seconds", "How long in seconds an item stays in workqueue before being requested",
		cm.queueDuration, q...)
	p.histogram("workqueue_work_duration_seconds", "How long in seconds processing an item from workqueue takes.",
		cm.workDuration, q...)
	if depth != nil {
		p.gauge("workqueue_depth", "Current depth of workqueue by workqueue and priority", float64(depth()), q...)
	}
	if inFlight != nil {
		_, unfinished, longest := inFlight()
		p.gauge("workqueue_unfinished_work_seconds", "How many seconds of work has been done that is in progress and "+
			"hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number "+
			"of stuck threads by observing the rate at which this increases.", unfinished.Seconds(), q...)
		p.gauge("workqueue_longest_running_processor_seconds", "How many seconds has the longest running processor "+
			"for workqueue been running.", longest.Seconds(), q...)
	}
}

// histogram is a Prometheus histogram with fixed buckets and a lock-free
// observe. A scrape racing with observe may see the sum without the count or
// the other way round; _count always equals the +Inf bucket.
type histogram struct {
	upper   []float64       // bucket upper bounds, ascending; +Inf is implicit
	counts  []atomic.Uint64 // counts[i]: observations in (upper[i-1], upper[i]]; the last one is (max, +Inf]
	sumBits atomic.Uint64   // math.Float64bits of the sum of observations
}

func newHistogram(upper []float64) *histogram {
	return &histogram{upper: upper, counts: make([]atomic.Uint64, len(upper)+1)}
}

func (h *histogram) observe(v float64) {
	h.counts[sort.SearchFloat64s(h.upper, v)].Add(1) // first bound >= v: le is inclusive
	for {
		old := h.sumBits.Load()
		if h.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// cumulative returns the count at or below each bound, then the total (+Inf).
func (h *histogram) cumulative() []uint64 {
	out := make([]uint64, len(h.counts))
	for i := range h.counts {
		out[i] = out[max(i-1, 0)] + h.counts[i].Load() // out[0] is still 0 when i == 0
	}
	return out
}

// page is one scrape, by family name. Families and each family's series are
// written sorted, whatever order they were added in.
type page map[string]*family

type family struct {
	typ, help string
	series    []string // each one label set's rendered sample lines
}

// counter, gauge and histogram add one series; labels are name, value pairs
// in ascending name order.
func (p page) counter(name, help string, v float64, labels ...string) {
	p.add(name, "counter", help, name+labelSet(labels)+" "+formatFloat(v)+"\n")
}

func (p page) gauge(name, help string, v float64, labels ...string) {
	p.add(name, "gauge", help, name+labelSet(labels)+" "+formatFloat(v)+"\n")
}

func (p page) histogram(name, help string, h *histogram, labels ...string) {
	var b strings.Builder
	l := labelSet(labels)
	open := "{"
	if l != "" {
		open = l[:len(l)-1] + "," // {a="x",
	}
	counts := h.cumulative()
	for i, n := range counts {
		le := math.Inf(1)
		if i < len(h.upper) {
			le = h.upper[i]
		}
		b.WriteString(name + "_bucket" + open + `le="` + formatFloat(le) + `"} ` + strconv.FormatUint(n, 10) + "\n")
	}
	b.WriteString(name + "_sum" + l + " " + formatFloat(math.Float64frombits(h.sumBits.Load())) + "\n")
	b.WriteString(name + "_count" + l + " " + strconv.FormatUint(counts[len(counts)-1], 10) + "\n")
	p.add(name, "histogram", help, b.String())
}

// summary adds a summary's series: the value at each quantile, the sum and
// the count.
func (p page) summary(name, help string, quantiles, values []float64, sum float64, count uint64, labels ...string) {
	var b strings.Builder
	l := labelSet(labels)
	open := "{"
	if l != "" {
		open = l[:len(l)-1] + ","
	}
	for i, q := range quantiles {
		b.WriteString(name + open + `quantile="` + formatFloat(q) + `"} ` + formatFloat(values[i]) + "\n")
	}
	b.WriteString(name + "_sum" + l + " " + formatFloat(sum) + "\n")
	b.WriteString(name + "_count" + l + " " + strconv.FormatUint(count, 10) + "\n")
	p.add(name, "summary", help, b.String())
}

func (p page) add(name, typ, help, series string) {
	if p[name] == nil {
		p[name] = &family{typ: typ, help: help}
	}
	p[name].series = append(p[name].series, series)
}

// writeTo writes the page: per family a HELP and a TYPE line, then its series.
func (p page) writeTo(w io.Writer) error {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(p)) {
		slices.Sort(p[name].series)
		b.WriteString("# HELP " + name + " " + escapeHelp(p[name].help) + "\n# TYPE " + name + " " + p[name].typ + "\n")
		b.WriteString(strings.Join(p[name].series, ""))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// labelSet renders name, value pairs as {a="x",b="y"}, or "" for none.
func labelSet(labels []string) string {
	var b strings.Builder
	for i := 0; i+1 < len(labels); i += 2 {
		b.WriteString("," + labels[i] + `="` + escapeLabel(labels[i+1]) + `"`)
	}
	if b.Len() == 0 {
		return ""
	}
	return "{" + b.String()[1:] + "}"
}

var (
	escapeLabel = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace // a label value: backslash, quote, newline
	escapeHelp  = strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace            // a HELP text: backslash, newline
)

// formatFloat writes a value as Prometheus' client library does: "1e-06", "+Inf", "NaN".
func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
