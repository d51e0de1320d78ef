package metrics

import (
	"strings"
	"testing"
	"time"
)

func TestWebhook_SeriesNamedAsControllerRuntime(t *testing.T) {
	m := New()
	w := m.Webhook("/validate-x")
	if m.Webhook("/validate-x") != w {
		t.Fatal("a second Webhook call for a path made new series")
	}
	w.Started()
	w.Started()
	w.Finished(200, 2*time.Millisecond)
	var b strings.Builder
	if _, err := m.Page().WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`controller_runtime_webhook_requests_total{code="200",webhook="/validate-x"} 1`,
		`controller_runtime_webhook_requests_in_flight{webhook="/validate-x"} 1`,
		`controller_runtime_webhook_latency_seconds_bucket{webhook="/validate-x",le="0.005"} 1`,
		`controller_runtime_webhook_latency_seconds_count{webhook="/validate-x"} 1`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
}
