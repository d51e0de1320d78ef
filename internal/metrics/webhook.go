package metrics

// The webhook series, as controller-runtime v0.22 names them:
//
//	controller_runtime_webhook_requests_total{code,webhook}  counter
//	controller_runtime_webhook_latency_seconds{webhook}
//	  histogram, Prometheus' default buckets
//	controller_runtime_webhook_requests_in_flight{webhook}  gauge
//
// webhook is the path served, code the HTTP status code answered.

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kctl-dev/kctl/internal/prom"
)

// defaultBuckets are prometheus.DefBuckets.
var defaultBuckets = []float64{
	0.005, 0.01, 0.025, 0.05, 0.1,
	0.25, 0.5, 1, 2.5, 5, 10,
}

// Webhook are one webhook path's series. It is safe for concurrent use.
type Webhook struct {
	path     string
	inFlight atomic.Int64
	latency  *prom.Histogram
	// codes count the requests by status code; it holds *atomic.Uint64
	// values.
	codes sync.Map
}

// Webhook returns the series of the webhook served at path, creating them
// on first use; they are on the page from then on.
func (m *Registry) Webhook(path string) *Webhook {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.webhooks == nil {
		m.webhooks = map[string]*Webhook{}
	}
	w := m.webhooks[path]
	if w == nil {
		w = &Webhook{
			path:    path,
			latency: prom.NewHistogram(defaultBuckets),
		}
		m.webhooks[path] = w
	}
	return w
}

// Started counts a request in flight; call Finished when it is answered.
func (w *Webhook) Started() { w.inFlight.Add(1) }

// Finished counts a request answered with code after took.
func (w *Webhook) Finished(code int, took time.Duration) {
	w.inFlight.Add(-1)
	w.latency.Observe(took.Seconds())
	label := strconv.Itoa(code)
	n, ok := w.codes.Load(label)
	if !ok {
		n, _ = w.codes.LoadOrStore(label, new(atomic.Uint64))
	}
	n.(*atomic.Uint64).Add(1)
}

// collect adds the webhook's series.
func (w *Webhook) collect(p *prom.Page) {
	for code, n := range w.codes.Range {
		v := float64(n.(*atomic.Uint64).Load())
		p.Counter("controller_runtime_webhook_requests_total",
			"Total number of admission requests by HTTP "+
				"status code.",
			v, "code", code.(string), "webhook", w.path)
	}
	p.Histogram("controller_runtime_webhook_latency_seconds",
		"Histogram of the latency of processing admission "+
			"requests",
		w.latency, "webhook", w.path)
	p.Gauge("controller_runtime_webhook_requests_in_flight",
		"Current number of admission requests being "+
			"served.",
		float64(w.inFlight.Load()), "webhook", w.path)
}
