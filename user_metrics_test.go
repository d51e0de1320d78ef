package kctl

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/kctl-dev/kctl/internal/metrics"
	"github.com/kctl-dev/kctl/internal/prom"
)

func TestMetrics_UserCounterGaugeHistogram_ExactPage(t *testing.T) {
	m := metrics.New()
	u := userMetrics(m)
	jobs, err := u.Counter("app_jobs_total", "Jobs run, by result.", "result", "queue")
	if err != nil {
		t.Fatal(err)
	}
	failed := jobs.With("failed", "a")
	failed.Inc()
	failed.Add(2.5)
	jobs.With("ok", `q"uote`).Inc()
	plain, err := u.Counter("app_ticks_total", "Ticks.") // shown at 0 from registration
	if err != nil {
		t.Fatal(err)
	}
	_ = plain
	temp, err := u.Gauge("app_temperature_celsius", "Temperature.")
	if err != nil {
		t.Fatal(err)
	}
	temp.Set(20)
	temp.Add(-1.5)
	temp.Inc()
	temp.Dec()
	temp.Dec()
	lat, err := u.Histogram("app_latency_seconds", "Latency.", []float64{0.1, 1, math.Inf(1)}, "op")
	if err != nil {
		t.Fatal(err)
	}
	get := lat.With("get")
	get.Observe(0.1) // le is inclusive
	get.Observe(0.5)
	get.Observe(7)
	want := `# HELP app_jobs_total Jobs run, by result.
# TYPE app_jobs_total counter
app_jobs_total{result="failed",queue="a"} 3.5
app_jobs_total{result="ok",queue="q\"uote"} 1
# HELP app_latency_seconds Latency.
# TYPE app_latency_seconds histogram
app_latency_seconds_bucket{op="get",le="0.1"} 1
app_latency_seconds_bucket{op="get",le="1"} 2
app_latency_seconds_bucket{op="get",le="+Inf"} 3
app_latency_seconds_sum{op="get"} 7.6
app_latency_seconds_count{op="get"} 3
# HELP app_temperature_celsius Temperature.
# TYPE app_temperature_celsius gauge
app_temperature_celsius 17.5
# HELP app_ticks_total Ticks.
# TYPE app_ticks_total counter
app_ticks_total 0
`
	if got := onlyFamilies(scrapeMetrics(t, m.Handler()), "app_"); got != want {
		t.Errorf("page:\n%s\nwant:\n%s", got, want)
	}
}

func TestMetrics_UserRegistration_ErrorsNameTheProblem(t *testing.T) {
	m := metrics.New()
	u := userMetrics(m)
	if _, err := u.Counter("app_done_total", "Done."); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Histogram("app_wait_seconds", "Wait.", nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		register func() error
		want     string
	}{
		{func() error { _, err := u.Counter("app_done_total", "Again."); return err }, "registered already"},
		{func() error { _, err := u.Gauge("app_done_total", "As a gauge."); return err }, "registered already"},
		{func() error { _, err := u.Gauge("app_wait_seconds_count", "A histogram's."); return err }, "registered already"},
		{func() error { _, err := u.Gauge("app-dash", "Dash."); return err }, "not a Prometheus metric name"},
		{func() error { _, err := u.Gauge("", "Empty."); return err }, "not a Prometheus metric name"},
		{func() error { _, err := u.Gauge("app_x", " "); return err }, "help text is empty"},
		{func() error { _, err := u.Gauge("app_x", "Bad \xff."); return err }, "help text is not UTF-8"},
		{func() error { _, err := u.Counter("app_jobs", "Jobs."); return err }, "ends in _total"},
		{func() error { _, err := u.Gauge("go_mine", "Mine."); return err }, "go_ are kctl's own"},
		{func() error { _, err := u.Counter("workqueue_mine_total", "Mine."); return err }, "workqueue_ are kctl's own"},
		{func() error { _, err := u.Gauge("app_y", "Y.", "a-b"); return err }, `label name "a-b"`},
		{func() error { _, err := u.Gauge("app_y", "Y.", "__x"); return err }, `label name "__x"`},
		{func() error { _, err := u.Gauge("app_y", "Y.", "a", "a"); return err }, `"a" is given twice`},
		{func() error { _, err := u.Histogram("app_h", "H.", nil, "le"); return err }, `label "le" of its own`},
		{func() error { _, err := u.Histogram("app_h", "H.", []float64{1, 1}); return err }, "strictly ascending"},
		{func() error { _, err := u.Histogram("app_h", "H.", []float64{math.NaN()}); return err }, "strictly ascending"},
	} {
		err := c.register()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "kctl: metric ") ||
			strings.Count(err.Error(), "kctl:") != 1 {
			t.Errorf("registration error = %v, want one with %q", err, c.want)
		}
	}
	// Nothing failed registration got onto the page, and what did is unchanged.
	page := onlyFamilies(scrapeMetrics(t, m.Handler()), "app_")
	if typ, _ := familyDocs(page); len(typ) != 2 || typ["app_done_total"] != "counter" || typ["app_wait_seconds"] != "histogram" {
		t.Errorf("families after failed registrations = %v, want app_done_total and app_wait_seconds", typ)
	}
}

func TestMetrics_UserMistakes_ValueLandsAndFirstIsLogged(t *testing.T) {
	m := metrics.New()
	u := userMetrics(m)
	var logs bytes.Buffer
	u.log = slog.New(slog.NewTextHandler(&logs, nil))
	jobs, err := u.Counter("app_jobs_total", "Jobs.", "result", "queue")
	if err != nil {
		t.Fatal(err)
	}
	jobs.With("failed").Inc()               // too few: queue=""
	jobs.With("failed", "a", "extra").Inc() // too many: extra dropped
	jobs.Inc()                              // no values at all
	jobs.With("failed", "a").Add(-1)        // ignored
	jobs.With("failed", "a").Add(math.NaN())
	jobs.With("bad\xffbyte", "a").Inc() // shown with U+FFFD: the page stays UTF-8
	s := samples(scrapeMetrics(t, m.Handler()))
	for series, want := range map[string]string{
		`app_jobs_total{result="failed",queue=""}`:             "1",
		`app_jobs_total{result="failed",queue="a"}`:            "1",
		`app_jobs_total{result="",queue=""}`:                   "1",
		"app_jobs_total{result=\"bad\uFFFDbyte\",queue=\"a\"}": "1",
	} {
		if s[series] != want {
			t.Errorf("%s = %q, want %s", series, s[series], want)
		}
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "app_jobs_total: got 1 label values") {
		t.Errorf("logged %d lines, want 1 naming the first mistake:\n%s", n, logs.String())
	}
}

func TestMetrics_UserSeries_ConcurrentUpdatesNoneLost(t *testing.T) {
	m := metrics.New()
	u := userMetrics(m)
	c, _ := u.Counter("app_n_total", "N.", "worker")
	g, _ := u.Gauge("app_level", "Level.")
	h, _ := u.Histogram("app_seconds", "Seconds.", []float64{1})
	const goroutines, each = 8, 1000
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			for range each {
				c.With(fmt.Sprint(i % 2)).Inc()
				g.Add(0.5)
				h.Observe(0.25)
				m.User.Collect(&prom.Page{}) // scrapes race with updates
			}
		})
	}
	wg.Wait()
	s := samples(scrapeMetrics(t, m.Handler()))
	for series, want := range map[string]string{
		`app_n_total{worker="0"}`: "4000", `app_n_total{worker="1"}`: "4000",
		"app_level": "4000", "app_seconds_count": "8000", "app_seconds_sum": "2000",
	} {
		if s[series] != want {
			t.Errorf("%s = %q, want %s", series, s[series], want)
		}
	}
}

// userMetrics returns the registry of the program's own metrics on m's
// page, as Manager.Metrics does, logging nowhere.
func userMetrics(m *metrics.Registry) *Metrics {
	return &Metrics{reg: &m.User, log: slog.New(slog.DiscardHandler)}
}
