package kctl

import (
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Metrics is where a program adds its own counters, gauges and histograms
// to the Manager's metrics page (Manager.ServeMetrics):
//
//	jobs, err := mgr.Metrics().Counter("myapp_jobs_total", "Jobs run, by result.", "result")
//	if err != nil {
//		return err
//	}
//	failed := jobs.With("failed") // look a series up once, use it often
//	failed.Inc()
//
// Register each metric once, at start-up, and keep what it returns. A name
// is a Prometheus name ([a-zA-Z_][a-zA-Z0-9_]*), so is a label name; a
// counter's name ends in _total. Registration returns an error, and changes
// nothing, for an invalid name, label or bucket list, for a name registered
// before (also as a histogram's _bucket, _sum or _count), and for a name
// with a prefix of kctl's own series (go_, process_, rest_client_,
// workqueue_, controller_runtime_, leader_election_, kctl_).
//
// A metric returned with an error works but is not shown. The metrics'
// methods never panic and never wait for a scrape. A mistake in a call (the
// wrong number of label values, a counter made to go down) is logged once
// per metric to the Manager's logger (Options.Logger), and the value lands
// where the method's doc says. Metrics and the metrics are safe for
// concurrent use; get a Metrics from Manager.Metrics (the zero value is
// unusable).
type Metrics struct {
	mu       sync.Mutex
	log      *slog.Logger
	families map[string]*userFamily // by name
	taken    map[string]bool        // the names of every sample line of families: a histogram takes four
}

// Metrics returns the registry of the program's own metrics, shown on the
// page that ServeMetrics serves next to kctl's.
func (m *Manager) Metrics() *Metrics {
	u := m.metrics.user
	u.mu.Lock()
	defer u.mu.Unlock()
	u.log = m.log
	return u
}

func newUserMetrics() *Metrics {
	return &Metrics{log: slog.New(slog.DiscardHandler), families: map[string]*userFamily{}, taken: map[string]bool{}}
}

// defBuckets are Histogram's buckets when it is given none: Prometheus'
// defaults, for durations in seconds.
var defBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Counter registers a counter named name (ending in _total) with the given
// label names; a counter only goes up. See Metrics for the errors.
func (r *Metrics) Counter(name, help string, labels ...string) (*Counter, error) {
	f, s, err := r.register(name, "counter", help, labels, nil)
	return &Counter{f: f, s: s}, err
}

// Gauge registers a gauge, a value that goes up and down, named name with
// the given label names. See Metrics for the errors.
func (r *Metrics) Gauge(name, help string, labels ...string) (*Gauge, error) {
	f, s, err := r.register(name, "gauge", help, labels, nil)
	return &Gauge{f: f, s: s}, err
}

// Histogram registers a histogram named name with the given label names,
// counting observations into buckets, the ascending upper bounds of its
// buckets (nil: Prometheus' defaults, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
// 0.5, 1, 2.5, 5 and 10, for seconds; a last +Inf is implied and may be left
// out).
// See Metrics for the errors.
func (r *Metrics) Histogram(name, help string, buckets []float64, labels ...string) (*Histogram, error) {
	if buckets == nil {
		buckets = defBuckets
	}
	buckets = slices.Clone(buckets)
	if len(buckets) > 0 && math.IsInf(buckets[len(buckets)-1], 1) {
		buckets = buckets[:len(buckets)-1]
	}
	f, s, err := r.register(name, "histogram", help, labels, buckets)
	return &Histogram{f: f, s: s}, err
}

// Counter is a counter, or, registered with label names, a family of
// counters, one per set of label values, chosen by With. Inc and Add on a
// family with labels count in the series whose label values are all "".
// Get one from Metrics.Counter (the zero value is unusable); it is safe for
// concurrent use.
type Counter struct {
	f *userFamily
	s *userSeries // nil: the series for no label values, looked up at each call
}

// With returns the counter for the label values, one per label name in the
// order registered; it takes a lock, so keep its result where a call is hot.
func (c *Counter) With(values ...string) *Counter { return &Counter{f: c.f, s: c.f.with(values)} }

// Inc adds 1.
func (c *Counter) Inc() { c.Add(1) }

// Add adds v. A negative or NaN v is ignored (and logged): counters do not
// go down.
func (c *Counter) Add(v float64) {
	if v < 0 || math.IsNaN(v) {
		c.f.misused(fmt.Sprintf("Add(%v) ignored: a counter does not go down; use a Gauge", v))
		return
	}
	c.f.or(c.s).add(v)
}

// Gauge is a gauge, or, registered with label names, a family of gauges, one
// per set of label values, chosen by With. Its methods on a family with
// labels set the series whose label values are all "". Get one from
// Metrics.Gauge (the zero value is unusable); it is safe for concurrent use.
type Gauge struct {
	f *userFamily
	s *userSeries
}

// With returns the gauge for the label values, as Counter.With does.
func (g *Gauge) With(values ...string) *Gauge { return &Gauge{f: g.f, s: g.f.with(values)} }

// Set sets the gauge to v.
func (g *Gauge) Set(v float64) { g.f.or(g.s).bits.Store(math.Float64bits(v)) }

// Add adds v, which may be negative.
func (g *Gauge) Add(v float64) { g.f.or(g.s).add(v) }

// Inc adds 1; Dec subtracts 1.
func (g *Gauge) Inc() { g.Add(1) }

func (g *Gauge) Dec() { g.Add(-1) }

// Histogram is a histogram, or, registered with label names, a family of
// histograms, one per set of label values, chosen by With. Observe on a
// family with labels counts in the series whose label values are all "".
// Get one from Metrics.Histogram (the zero value is unusable); it is safe
// for concurrent use, and Observe takes no lock.
type Histogram struct {
	f *userFamily
	s *userSeries
}

// With returns the histogram for the label values, as Counter.With does.
func (h *Histogram) With(values ...string) *Histogram {
	return &Histogram{f: h.f, s: h.f.with(values)}
}

// Observe counts v into the first bucket whose upper bound is at least v,
// and adds it to the sum.
func (h *Histogram) Observe(v float64) { h.f.or(h.s).hist.observe(v) }

// reservedPrefixes are those of the series kctl writes itself.
var reservedPrefixes = []string{"go_", "process_", "rest_client_", "workqueue_", "controller_runtime_", "leader_election_", "kctl_"}

// isName reports whether s is a Prometheus metric or label name,
// [a-zA-Z_][a-zA-Z0-9_]* (the metric names of recording rules may also
// hold colons; a program's may not).
func isName(s string) bool {
	for i, c := range s {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}

// register checks and adds one family, and returns it with its series when
// it has no labels (nil otherwise). On error it returns an unregistered
// family, whose series work but are not shown.
func (r *Metrics) register(name, typ, help string, labels []string, buckets []float64) (*userFamily, *userSeries, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := &userFamily{name: name, typ: typ, help: help, labels: slices.Clone(labels), buckets: buckets,
		log: r.log, series: map[string]*userSeries{}}
	err := f.check()
	for _, s := range f.sampleNames() {
		if err == nil && r.taken[s] {
			err = fmt.Errorf("kctl: metric %q: %s is registered already: register each metric once and keep what registration returns", name, s)
		}
	}
	var plain *userSeries
	if len(labels) == 0 {
		plain = f.with(nil) // shown at 0 from now on
	}
	if err != nil {
		return f, plain, err
	}
	for _, s := range f.sampleNames() {
		r.taken[s] = true
	}
	r.families[name] = f
	return f, plain, nil
}

// collect adds every registered family's series to p.
func (r *Metrics) collect(p page) {
	r.mu.Lock()
	families := slices.Collect(maps.Values(r.families))
	r.mu.Unlock()
	for _, f := range families {
		f.collect(p)
	}
}

// userFamily is one registered metric: its series by label values. Every
// series has one value per label name, and a histogram series has a
// histogram with the family's buckets.
type userFamily struct {
	name, typ, help string
	labels          []string
	buckets         []float64 // a histogram's
	log             *slog.Logger
	warned          atomic.Bool // a mistake was logged

	mu     sync.Mutex
	series map[string]*userSeries // by label values joined with "\xff"
}

// userSeries is one series' value: a histogram's, or the float64 bits of a
// counter's or gauge's.
type userSeries struct {
	labels []string // name, value pairs, for the page
	bits   atomic.Uint64
	hist   *histogram
}

func (s *userSeries) add(v float64) {
	for {
		old := s.bits.Load()
		if s.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// check returns what is wrong with f's name, help, labels and buckets.
func (f *userFamily) check() error {
	var problem string
	switch {
	case !isName(f.name):
		problem = "the name is not a Prometheus metric name, [a-zA-Z_][a-zA-Z0-9_]*"
	case strings.TrimSpace(f.help) == "":
		problem = "the help text is empty: say what it measures"
	case !utf8.ValidString(f.help):
		problem = "the help text is not UTF-8"
	case f.typ == "counter" && !strings.HasSuffix(f.name, "_total"):
		problem = "a counter's name ends in _total (Prometheus' convention, which promtool checks)"
	}
	for _, prefix := range reservedPrefixes {
		if problem == "" && strings.HasPrefix(f.name, prefix) {
			problem = "names beginning with " + prefix + " are kctl's own; begin it with your program's name"
		}
	}
	for i, l := range f.labels {
		switch {
		case problem != "":
		case !isName(l) || strings.HasPrefix(l, "__"):
			problem = fmt.Sprintf("label name %q is not a Prometheus label name, [a-zA-Z_][a-zA-Z0-9_]* not beginning with __", l)
		case slices.Contains(f.labels[:i], l):
			problem = fmt.Sprintf("label name %q is given twice", l)
		case l == "le" && f.typ == "histogram":
			problem = `a histogram has a label "le" of its own: name yours otherwise`
		}
	}
	for i, b := range f.buckets {
		if problem == "" && (math.IsNaN(b) || math.IsInf(b, 0) || i > 0 && b <= f.buckets[i-1]) {
			problem = fmt.Sprintf("buckets %v are not finite and strictly ascending", f.buckets)
		}
	}
	if problem == "" {
		return nil
	}
	return fmt.Errorf("kctl: metric %q: %s", f.name, problem)
}

// sampleNames are the names of f's sample lines on the page.
func (f *userFamily) sampleNames() []string {
	if f.typ == "histogram" {
		return []string{f.name, f.name + "_bucket", f.name + "_sum", f.name + "_count"}
	}
	return []string{f.name}
}

// or returns s, or the series for no label values when s is nil.
func (f *userFamily) or(s *userSeries) *userSeries {
	if s != nil {
		return s
	}
	return f.with(nil)
}

// with returns the series for values, making it on first use. Missing
// values are "" and extra ones are dropped, bytes that are not UTF-8 become
// U+FFFD (the page must be UTF-8), and the mistake is logged.
func (f *userFamily) with(values []string) *userSeries {
	if len(values) != len(f.labels) {
		f.misused(fmt.Sprintf("got %d label values %q, want %d, for %q: missing values are \"\", extra ones dropped",
			len(values), values, len(f.labels), f.labels))
		values = append(slices.Clone(values), make([]string, len(f.labels))...)[:len(f.labels)]
	}
	for i, v := range values {
		if !utf8.ValidString(v) {
			f.misused(fmt.Sprintf("label value %q is not UTF-8: its bad bytes are shown as U+FFFD", v))
			values = slices.Clone(values)
			values[i] = strings.ToValidUTF8(v, "\uFFFD")
		}
	}
	key := strings.Join(values, "\xff") // 0xff is never in UTF-8 text
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.series[key]
	if s != nil {
		return s
	}
	s = &userSeries{}
	for i, l := range f.labels {
		s.labels = append(s.labels, l, values[i])
	}
	if f.typ == "histogram" {
		s.hist = newHistogram(f.buckets)
	}
	f.series[key] = s
	return s
}

// misused logs a mistake in a call on f, the first one only.
func (f *userFamily) misused(what string) {
	if f.warned.CompareAndSwap(false, true) {
		f.log.Error("kctl: metric "+f.name+": "+what+" (only the first mistake with this metric is logged)", "metric", f.name)
	}
}

func (f *userFamily) collect(p page) {
	f.mu.Lock()
	series := slices.Collect(maps.Values(f.series))
	f.mu.Unlock()
	for _, s := range series {
		switch f.typ {
		case "counter":
			p.counter(f.name, f.help, math.Float64frombits(s.bits.Load()), s.labels...)
		case "gauge":
			p.gauge(f.name, f.help, math.Float64frombits(s.bits.Load()), s.labels...)
		case "histogram":
			p.histogram(f.name, f.help, s.hist, s.labels...)
		}
	}
}
