package kctl

// Floor 2: the Manager's own metrics (internal/metrics): each request of
// its connection, each informer of its cache and each reconcile of its
// controllers, counted on the metrics page (ServeMetrics) through floor
// 1's points: the Conn's requests observer, the Cache's made hook and the
// Manager's observers hook.

import (
	"time"

	"github.com/kctl-dev/kctl/internal/metrics"
)

// countInMetrics puts m.metrics on m's points; NewManager calls it.
func (m *Manager) countInMetrics() {
	m.conn.requests = m.metrics.Requests
	m.observers = metricsObservers{m.metrics}
}

// countInformer adds inf's series (objects, bytes, undecodable objects)
// to the metrics page: called by the Cache's made hook.
func (m *Manager) countInformer(inf cachedInformer, meta bool) {
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
