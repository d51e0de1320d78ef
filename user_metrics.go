package kctl

// An extra: a program's own metrics (Manager.Metrics), shown on the page
// that ServeMetrics serves next to kctl's (internal/metrics).

import (
	"fmt"
	"log/slog"
	"math"
	"slices"

	"github.com/kctl-dev/kctl/internal/prom"
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
	// reg holds the families registered, the Manager's for its page.
	reg *prom.Registry
	// log gets the first mistake in a call on each metric.
	log *slog.Logger
	// reserved lets names take kctl's own prefixes (Reserved).
	reserved bool
}

// Metrics returns the registry of the program's own metrics, shown on the
// page that ServeMetrics serves next to kctl's.
func (m *Manager) Metrics() *Metrics {
	return &Metrics{reg: &m.metrics.User, log: m.log}
}

// Reserved returns r letting names take the prefixes of kctl's own
// series (kctl_, controller_runtime_, ...), for the packages that build
// on a Manager and write series under the names controller-runtime's
// dashboards know (kctl/webhook's controller_runtime_webhook_*). The
// other checks, and a name registered before, still fail. A program
// names its metrics after itself and does not call it.
func (r *Metrics) Reserved() *Metrics {
	return &Metrics{reg: r.reg, log: r.log, reserved: true}
}

// defBuckets are Histogram's buckets when it is given none: Prometheus'
// defaults, for durations in seconds.
var defBuckets = []float64{
	0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1,
	2.5, 5, 10,
}

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
	n := len(buckets)
	if n > 0 && math.IsInf(buckets[n-1], 1) {
		buckets = buckets[:n-1]
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
	f *prom.Family
	// s is the series counted in; nil: the series for no label
	// values, looked up at each call.
	s *prom.Series
}

// With returns the counter for the label values, one per label name in the
// order registered; it takes a lock, so keep its result where a call is hot.
func (c *Counter) With(values ...string) *Counter {
	return &Counter{f: c.f, s: c.f.With(values)}
}

// Inc adds 1.
func (c *Counter) Inc() { c.Add(1) }

// Add adds v. A negative or NaN v is ignored (and logged): counters do not
// go down.
func (c *Counter) Add(v float64) {
	if v < 0 || math.IsNaN(v) {
		c.f.Mistake(fmt.Sprintf("Add(%v) ignored: "+
			"a counter does not go down; use a Gauge", v))
		return
	}
	series(c.f, c.s).Add(v)
}

// Gauge is a gauge, or, registered with label names, a family of gauges, one
// per set of label values, chosen by With. Its methods on a family with
// labels set the series whose label values are all "". Get one from
// Metrics.Gauge (the zero value is unusable); it is safe for concurrent use.
type Gauge struct {
	f *prom.Family
	s *prom.Series // as Counter's
}

// With returns the gauge for the label values, as Counter.With does.
func (g *Gauge) With(values ...string) *Gauge {
	return &Gauge{f: g.f, s: g.f.With(values)}
}

// Set sets the gauge to v.
func (g *Gauge) Set(v float64) { series(g.f, g.s).Set(v) }

// Add adds v, which may be negative.
func (g *Gauge) Add(v float64) { series(g.f, g.s).Add(v) }

// Inc adds 1; Dec subtracts 1.
func (g *Gauge) Inc() { g.Add(1) }

func (g *Gauge) Dec() { g.Add(-1) }

// Histogram is a histogram, or, registered with label names, a family of
// histograms, one per set of label values, chosen by With. Observe on a
// family with labels counts in the series whose label values are all "".
// Get one from Metrics.Histogram (the zero value is unusable); it is safe
// for concurrent use, and Observe takes no lock.
type Histogram struct {
	f *prom.Family
	s *prom.Series // as Counter's
}

// With returns the histogram for the label values, as Counter.With does.
func (h *Histogram) With(values ...string) *Histogram {
	return &Histogram{f: h.f, s: h.f.With(values)}
}

// Observe counts v into the first bucket whose upper bound is at least v,
// and adds it to the sum.
func (h *Histogram) Observe(v float64) { series(h.f, h.s).Observe(v) }

// series returns s, or f's series for no label values when s is nil.
func series(f *prom.Family, s *prom.Series) *prom.Series {
	if s != nil {
		return s
	}
	return f.With(nil)
}

// register checks and adds one family, and returns it with its series
// when it has no labels (nil otherwise). On error it returns an
// unregistered family, whose series work but are not shown.
func (r *Metrics) register(name, typ, help string, labels []string, buckets []float64) (*prom.Family, *prom.Series, error) {
	f := &prom.Family{
		Name:    name,
		Type:    typ,
		Help:    help,
		Labels:  slices.Clone(labels),
		Buckets: buckets,
		Mistake: prom.LogFirst(r.log, name),
	}
	err := prom.Check(f, r.reserved)
	var plain *prom.Series
	if len(labels) == 0 {
		plain = f.With(nil) // shown at 0 from now on
	}
	if err != nil {
		return f, plain, err
	}
	taken := r.reg.Add(f)
	if taken != "" {
		err = fmt.Errorf("kctl: metric %q: %s is registered already: "+
			"register each metric once and keep what "+
			"registration returns", name, taken)
	}
	return f, plain, err
}
