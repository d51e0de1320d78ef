package webhook

// The server's series on the Manager's metrics page, registered through
// kctl's Metrics under controller-runtime v0.22's names, so that its
// dashboards work unchanged:
//
//	controller_runtime_webhook_requests_total{code,webhook}  counter
//	controller_runtime_webhook_latency_seconds{webhook}
//	  histogram, Prometheus' default buckets
//	controller_runtime_webhook_requests_in_flight{webhook}  gauge
//	kctl_webhook_certificate_rejected  gauge
//
// webhook is the path served, code the HTTP status code answered.

import (
	"strconv"
	"time"

	"github.com/kctl-dev/kctl"
)

// serverMetrics are one Server's series.
type serverMetrics struct {
	requests     *kctl.Counter
	latency      *kctl.Histogram
	inFlight     *kctl.Gauge
	certRejected *kctl.Gauge
}

// newServerMetrics registers the series with reg. It fails if they are
// registered already: the Manager serves webhooks from another Server.
func newServerMetrics(reg *kctl.Metrics) (*serverMetrics, error) {
	m := &serverMetrics{}
	var errs [4]error
	m.requests, errs[0] = reg.Counter("controller_runtime_webhook_requests_total",
		"Total number of admission requests by HTTP status code.",
		"code", "webhook")
	m.latency, errs[1] = reg.Histogram("controller_runtime_webhook_latency_seconds",
		"Histogram of the latency of processing admission requests",
		nil, "webhook")
	m.inFlight, errs[2] = reg.Gauge("controller_runtime_webhook_requests_in_flight",
		"Current number of admission requests being served.",
		"webhook")
	m.certRejected, errs[3] = reg.Gauge("kctl_webhook_certificate_rejected",
		"1 while the webhook server's certificate files hold "+
			"a pair it does not serve (the log and /readyz?verbose "+
			"say why; the last good pair serves), else 0.")
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return m, nil
}

// pathMetrics are the series of one webhook path.
type pathMetrics struct {
	path     string
	requests *kctl.Counter
	latency  *kctl.Histogram
	inFlight *kctl.Gauge
}

// of returns the series of the webhook at path; its latency and
// in-flight series are on the page from then on.
func (m *serverMetrics) of(path string) pathMetrics {
	return pathMetrics{
		path:     path,
		requests: m.requests,
		latency:  m.latency.With(path),
		inFlight: m.inFlight.With(path),
	}
}

// started counts a request in flight; call finished when it is answered.
func (p pathMetrics) started() { p.inFlight.Inc() }

// finished counts a request answered with code after took.
func (p pathMetrics) finished(code int, took time.Duration) {
	p.inFlight.Dec()
	p.latency.Observe(took.Seconds())
	p.requests.With(strconv.Itoa(code), p.path).Inc()
}
