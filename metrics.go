package kctl

import (
	"io"
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
// (version 0.0.4), written by hand. Names, labels, help texts and buckets are
// the ones controller-runtime v0.22 registers, so dashboards and alerts built
// for controller-runtime work unchanged:
//
//	controller_runtime_reconcile_total{controller,result}   counter, result = error|requeue|requeue_after|success
//	controller_runtime_reconcile_errors_total{controller}   counter
//	controller_runtime_reconcile_time_seconds{controller}   histogram, 0.005s .. 60s
//	controller_runtime_max_concurrent_reconciles{controller} gauge
//	controller_runtime_active_workers{controller}           gauge
//	workqueue_{depth,unfinished_work_seconds,longest_running_processor_seconds}{controller,name}  gauges
//	workqueue_{adds,retries}_total{controller,name}         counters
//	workqueue_{queue,work}_duration_seconds{controller,name} histograms, 1e-8s .. 1000s
//	leader_election_master_status{name}                     gauge, 1 while leading
//	kctl_cache_objects{resource}, kctl_cache_bytes{resource} gauges (kctl's own)
//
// The workqueue label values are both the controller name, as in
// controller-runtime. The hot path (reconciled, Added, Waited, Worked, Retried)
// takes no lock: counters are atomic integers and a histogram observation is
// one bucket increment plus a compare-and-swap on the sum.

// reconcileBuckets are controller-runtime's buckets for reconcile_time_seconds.
var reconcileBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
	0.6, 0.7, 0.8, 0.9, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60}

// workqueueBuckets are controller-runtime's workqueue buckets,
// prometheus.ExponentialBuckets(10e-9, 10, 12): computed by repeated
// multiplication, so the le labels match its page digit for digit
// ("9.999999999999999e-06").
var workqueueBuckets = exponentialBuckets(10e-9, 10, 12)

func exponentialBuckets(start, factor float64, n int) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}

// reconcileResults are the result label values, in page order.
var reconcileResults = [...]string{"error", "requeue", "requeue_after", "success"}

// metrics is the registry behind one Manager's metrics page.
//
//	m := newMetrics()
//	cm := m.forController("widgets", 2) // once per controller; cm is its QueueObserver too
//	cm.reconciled("success", took)      // after each Reconcile
//	http.Handle("/metrics", m.handler())
//
// The zero value is not usable; call newMetrics. Every method is safe for
// concurrent use. Values read at scrape time (queue depth, cache stats) come
// from functions registered once; they are called without m.mu held.
type metrics struct {
	mu          sync.Mutex
	controllers map[string]*controllerMetrics
	informers   map[string]func() (objects int, bytes int64) // by resource
	leaders     map[string]bool                              // by lease name
}

func newMetrics() *metrics {
	return &metrics{
		controllers: map[string]*controllerMetrics{},
		informers:   map[string]func() (int, int64){},
		leaders:     map[string]bool{},
	}
}

// forController returns the metrics of the named controller, creating them on
// first use, and sets its max_concurrent_reconciles to workers. Every series
// of the controller is on the page from then on, at zero until observed.
func (m *metrics) forController(name string, workers int) *controllerMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	cm := m.controllers[name]
	if cm == nil {
		cm = &controllerMetrics{
			name:          name,
			reconcileTime: newHistogram(reconcileBuckets),
			queueDuration: newHistogram(workqueueBuckets),
			workDuration:  newHistogram(workqueueBuckets),
		}
		m.controllers[name] = cm
	}
	cm.maxWorkers.Store(int64(workers))
	return cm
}

// addInformer puts the informer's object count and estimated bytes on the
// page as kctl_cache_objects and kctl_cache_bytes{resource}. stats is called
// at every scrape; a second call for the same resource replaces the first.
func (m *metrics) addInformer(resource string, stats func() (objects int, bytes int64)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.informers[resource] = stats
}

// setLeader records whether this process holds the named lease.
func (m *metrics) setLeader(lease string, leading bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leaders[lease] = leading
}

// handler serves the metrics page. Each request takes a fresh snapshot; the
// page is sorted by metric name and then by label values, so it is stable.
func (m *metrics) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		m.page().writeTo(w)
	})
}

// page collects every series. Registered functions run after m.mu is released.
func (m *metrics) page() *page {
	m.mu.Lock()
	cms := make([]*controllerMetrics, 0, len(m.controllers))
	for _, cm := range m.controllers {
		cms = append(cms, cm)
	}
	informers := make(map[string]func() (int, int64), len(m.informers))
	for r, f := range m.informers {
		informers[r] = f
	}
	leaders := make(map[string]bool, len(m.leaders))
	for l, v := range m.leaders {
		leaders[l] = v
	}
	m.mu.Unlock()

	p := &page{}
	for _, cm := range cms {
		cm.collect(p)
	}
	for r, stats := range informers {
		objects, bytes := stats()
		p.gauge("kctl_cache_objects", "Number of objects in the informer's cache per resource.", float64(objects), "resource", r)
		p.gauge("kctl_cache_bytes", "Estimated bytes held by the objects in the informer's cache per resource.", float64(bytes), "resource", r)
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

// controllerMetrics are one controller's series. It implements QueueObserver
// for the controller's queue. All methods are safe for concurrent use;
// reconciled and the observer methods are lock-free.
type controllerMetrics struct {
	name          string
	maxWorkers    atomic.Int64
	active        atomic.Int64
	results       [len(reconcileResults)]atomic.Uint64
	reconcileTime *histogram
	adds, retries atomic.Uint64
	queueDuration *histogram
	workDuration  *histogram

	mu       sync.Mutex // guards the fields below
	depth    func() int
	inFlight func() (n int, unfinished, longest time.Duration)
	other    map[string]uint64 // results outside reconcileResults, a caller's mistake kept visible
}

// reconciled counts one Reconcile call and its duration. result is one of
// "success", "error", "requeue" or "requeue_after"; "error" also counts in
// reconcile_errors_total.
func (cm *controllerMetrics) reconciled(result string, took time.Duration) {
	cm.reconcileTime.observe(took.Seconds())
	if i := slices.Index(reconcileResults[:], result); i >= 0 {
		cm.results[i].Add(1)
		return
	}
	cm.mu.Lock()
	if cm.other == nil {
		cm.other = map[string]uint64{}
	}
	cm.other[result]++
	cm.mu.Unlock()
}

// workerStarted and workerStopped bracket each Reconcile call for
// controller_runtime_active_workers.
func (cm *controllerMetrics) workerStarted() { cm.active.Add(1) }
func (cm *controllerMetrics) workerStopped() { cm.active.Add(-1) }

// setQueue registers the queue's read-outs, called at scrape time for
// workqueue_depth, workqueue_unfinished_work_seconds and
// workqueue_longest_running_processor_seconds.
func (cm *controllerMetrics) setQueue(depth func() int, inFlight func() (n int, unfinished, longest time.Duration)) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	cm.depth, cm.inFlight = depth, inFlight
}

// Added, Waited, Worked and Retried implement QueueObserver.
func (cm *controllerMetrics) Added()                 { cm.adds.Add(1) }
func (cm *controllerMetrics) Waited(d time.Duration) { cm.queueDuration.observe(d.Seconds()) }
func (cm *controllerMetrics) Worked(d time.Duration) { cm.workDuration.observe(d.Seconds()) }
func (cm *controllerMetrics) Retried()               { cm.retries.Add(1) }

func (cm *controllerMetrics) collect(p *page) {
	cm.mu.Lock()
	depth, inFlight := cm.depth, cm.inFlight
	other := make(map[string]uint64, len(cm.other))
	for r, n := range cm.other {
		other[r] = n
	}
	cm.mu.Unlock()

	c := cm.name
	const total = "controller_runtime_reconcile_total"
	const totalHelp = "Total number of reconciliations per controller"
	for i, r := range reconcileResults {
		p.counter(total, totalHelp, cm.results[i].Load(), "controller", c, "result", r)
	}
	for r, n := range other {
		p.counter(total, totalHelp, n, "controller", c, "result", r)
	}
	p.counter("controller_runtime_reconcile_errors_total", "Total number of reconciliation errors per controller",
		cm.results[0].Load(), "controller", c)
	p.histogram("controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per controller",
		cm.reconcileTime, "controller", c)
	p.gauge("controller_runtime_max_concurrent_reconciles", "Maximum number of concurrent reconciles per controller",
		float64(cm.maxWorkers.Load()), "controller", c)
	p.gauge("controller_runtime_active_workers", "Number of currently used workers per controller",
		float64(cm.active.Load()), "controller", c)

	q := []string{"controller", c, "name", c}
	p.counter("workqueue_adds_total", "Total number of adds handled by workqueue", cm.adds.Load(), q...)
	p.counter("workqueue_retries_total", "Total number of retries handled by workqueue", cm.retries.Load(), q...)
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

// histogram is a Prometheus histogram with fixed buckets. observe is
// lock-free. A scrape racing with observe may see the sum without the
// observation's count or the other way round; _count always equals the +Inf
// bucket, because both are computed from the same bucket counters.
type histogram struct {
	upper   []float64       // bucket upper bounds, ascending; +Inf is implicit
	le      []string        // the le label of each bucket, "+Inf" last
	counts  []atomic.Uint64 // counts[i]: observations in (upper[i-1], upper[i]]; the last one is (max, +Inf]
	sumBits atomic.Uint64   // math.Float64bits of the sum of observations
}

func newHistogram(upper []float64) *histogram {
	le := make([]string, 0, len(upper)+1)
	for _, u := range upper {
		le = append(le, formatFloat(u))
	}
	return &histogram{upper: upper, le: append(le, "+Inf"), counts: make([]atomic.Uint64, len(upper)+1)}
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
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
		out[i] = n
	}
	return out
}

// page is one scrape of the metrics page. Families and series are written
// sorted, whatever order they were added in.
type page struct {
	families map[string]*family
}

type family struct {
	name, typ, help string
	series          []series
}

// series is one label set of a family and its rendered sample lines.
type series struct {
	values []string // label values in label-name order, the sort key
	text   string
}

// counter, gauge and histogram add one series; labels are name, value pairs
// in ascending name order.
func (p *page) counter(name, help string, v uint64, labels ...string) {
	p.add(name, "counter", help, labels, name+braces(renderLabels(labels))+" "+strconv.FormatUint(v, 10)+"\n")
}

func (p *page) gauge(name, help string, v float64, labels ...string) {
	p.add(name, "gauge", help, labels, name+braces(renderLabels(labels))+" "+formatFloat(v)+"\n")
}

func (p *page) histogram(name, help string, h *histogram, labels ...string) {
	l := renderLabels(labels)
	sep := ","
	if l == "" {
		sep = ""
	}
	var b strings.Builder
	counts := h.cumulative()
	for i, n := range counts {
		b.WriteString(name + "_bucket{" + l + sep + `le="` + h.le[i] + `"} ` + strconv.FormatUint(n, 10) + "\n")
	}
	l = braces(l)
	b.WriteString(name + "_sum" + l + " " + formatFloat(math.Float64frombits(h.sumBits.Load())) + "\n")
	b.WriteString(name + "_count" + l + " " + strconv.FormatUint(counts[len(counts)-1], 10) + "\n")
	p.add(name, "histogram", help, labels, b.String())
}

func (p *page) add(name, typ, help string, labels []string, text string) {
	if p.families == nil {
		p.families = map[string]*family{}
	}
	f := p.families[name]
	if f == nil {
		f = &family{name: name, typ: typ, help: help}
		p.families[name] = f
	}
	values := make([]string, 0, len(labels)/2)
	for i := 1; i < len(labels); i += 2 {
		values = append(values, labels[i])
	}
	f.series = append(f.series, series{values: values, text: text})
}

// writeTo writes the page: per family a HELP and a TYPE line, then its series.
func (p *page) writeTo(w io.Writer) error {
	names := make([]string, 0, len(p.families))
	for n := range p.families {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		f := p.families[n]
		slices.SortFunc(f.series, func(a, b series) int { return slices.Compare(a.values, b.values) })
		b.WriteString("# HELP " + f.name + " " + escapeHelp(f.help) + "\n# TYPE " + f.name + " " + f.typ + "\n")
		for _, s := range f.series {
			b.WriteString(s.text)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// renderLabels renders name, value pairs as a="x",b="y".
func renderLabels(labels []string) string {
	var b strings.Builder
	for i := 0; i+1 < len(labels); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(labels[i] + `="` + escapeLabel(labels[i+1]) + `"`)
	}
	return b.String()
}

// braces wraps rendered labels in {}, or returns "" for none.
func braces(l string) string {
	if l == "" {
		return ""
	}
	return "{" + l + "}"
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

// escapeLabel escapes a label value: backslash, double quote and newline.
func escapeLabel(s string) string { return labelEscaper.Replace(s) }

// escapeHelp escapes a HELP text: backslash and newline.
func escapeHelp(s string) string { return helpEscaper.Replace(s) }

// formatFloat writes a sample value as Prometheus' client library does.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, +1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
