package kctl

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/metrics"
)

func scrapeMetrics(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics = %d, want 200", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type = %q, want the Prometheus text format 0.0.4", ct)
	}
	return rec.Body.String()
}

// samples returns a page's sample lines as series (name and labels) -> value.
func samples(page string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(page) {
		if k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " "); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out
}

// familyDocs returns a page's families as name -> TYPE, and name -> HELP.
func familyDocs(page string) (typ, help map[string]string) {
	typ, help = map[string]string{}, map[string]string{}
	for line := range strings.Lines(strings.TrimSpace(page)) {
		line = strings.TrimSuffix(line, "\n")
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, t, _ := strings.Cut(rest, " ")
			typ[name] = t
		}
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, h, _ := strings.Cut(rest, " ")
			help[name] = h
		}
	}
	return typ, help
}

// value returns the value of series on page as a float, failing the test
// if it is missing.
func value(t *testing.T, page map[string]string, series string) float64 {
	t.Helper()
	s, ok := page[series]
	if !ok {
		t.Fatalf("page has no series %s", series)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%s = %q: %v", series, s, err)
	}
	return v
}

func TestMetrics_InformersAndLeader_ExactPage(t *testing.T) {
	m := metrics.New()
	m.AddInformer("pods/v1", func() (int, int64) { return 3, 4096 })
	m.AddInformer("deployments.apps/v1", func() (int, int64) { return 1, 2e9 })
	m.SetLeader("kctl-lock", true)
	m.SetLeader("other", true)
	m.SetLeader("other", false)
	want := `# HELP kctl_cache_bytes Encoded size in bytes (protobuf or JSON) of the objects in the informer's cache per resource; not the memory they take, which decoding raises and sharing equal parts lowers.
# TYPE kctl_cache_bytes gauge
kctl_cache_bytes{resource="deployments.apps/v1"} 2e+09
kctl_cache_bytes{resource="pods/v1"} 4096
# HELP kctl_cache_objects Number of objects in the informer's cache per resource.
# TYPE kctl_cache_objects gauge
kctl_cache_objects{resource="deployments.apps/v1"} 1
kctl_cache_objects{resource="pods/v1"} 3
# HELP leader_election_master_status Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.
# TYPE leader_election_master_status gauge
leader_election_master_status{name="kctl-lock"} 1
leader_election_master_status{name="other"} 0
`
	if got := onlyFamilies(scrapeMetrics(t, m.Handler()), "kctl_", "leader_election_"); got != want {
		t.Errorf("page:\n%s\nwant:\n%s", got, want)
	}
}

// onlyFamilies returns the lines of page that belong to families whose names
// begin with one of prefixes: their HELP, TYPE and sample lines.
func onlyFamilies(page string, prefixes ...string) string {
	var b strings.Builder
	keep := false
	for line := range strings.Lines(page) {
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			keep = false
			for _, p := range prefixes {
				keep = keep || strings.HasPrefix(rest, p)
			}
		}
		if keep {
			b.WriteString(line)
		}
	}
	return b.String()
}

func TestMetrics_Controller_PageCountsReconcilesAndQueue(t *testing.T) {
	m := metrics.New()
	cm := m.Controller("widgets", 4)
	for _, r := range []string{"success", "success", "error", "requeue", "requeue_after", "success"} {
		cm.Reconciled(r, 20*time.Millisecond)
	}
	cm.Reconciled("bogus", 0)
	cm.Panicked()
	cm.FailedTerminally()
	cm.FailedTerminally()
	cm.WorkerStarted()
	cm.WorkerStarted()
	cm.WorkerStopped()
	cm.Added()
	cm.Added()
	cm.Retried()
	cm.Waited(2 * time.Microsecond)
	cm.Worked(3 * time.Second)
	cm.SetQueue(func() int { return 5 }, func() (int, time.Duration, time.Duration) { return 1, 1500 * time.Millisecond, time.Second })
	if again := m.Controller("widgets", 4); again != cm {
		t.Errorf("Controller twice returned a new metrics.Controller")
	}
	page := scrapeMetrics(t, m.Handler())
	for _, line := range []string{
		`controller_runtime_reconcile_total{controller="widgets",result="error"} 1`,
		`controller_runtime_reconcile_total{controller="widgets",result="requeue"} 1`,
		`controller_runtime_reconcile_total{controller="widgets",result="requeue_after"} 1`,
		`controller_runtime_reconcile_total{controller="widgets",result="success"} 3`,
		`controller_runtime_reconcile_total{controller="widgets",result="bogus"} 1`,
		`controller_runtime_reconcile_errors_total{controller="widgets"} 1`,
		`controller_runtime_reconcile_panics_total{controller="widgets"} 1`,
		`controller_runtime_terminal_reconcile_errors_total{controller="widgets"} 2`,
		`# HELP controller_runtime_reconcile_panics_total Total number of reconciliation panics per controller`,
		`# HELP controller_runtime_terminal_reconcile_errors_total Total number of terminal reconciliation errors per controller`,
		`controller_runtime_reconcile_time_seconds_bucket{controller="widgets",le="0.01"} 1`, // the bogus one took 0
		`controller_runtime_reconcile_time_seconds_bucket{controller="widgets",le="0.025"} 7`,
		`controller_runtime_reconcile_time_seconds_bucket{controller="widgets",le="+Inf"} 7`,
		`controller_runtime_reconcile_time_seconds_count{controller="widgets"} 7`,
		`controller_runtime_max_concurrent_reconciles{controller="widgets"} 4`,
		`controller_runtime_active_workers{controller="widgets"} 1`,
		`workqueue_adds_total{controller="widgets",name="widgets"} 2`,
		`workqueue_retries_total{controller="widgets",name="widgets"} 1`,
		`workqueue_depth{controller="widgets",name="widgets"} 5`,
		`workqueue_unfinished_work_seconds{controller="widgets",name="widgets"} 1.5`,
		`workqueue_longest_running_processor_seconds{controller="widgets",name="widgets"} 1`,
		`workqueue_queue_duration_seconds_bucket{controller="widgets",name="widgets",le="9.999999999999999e-06"} 1`,
		`workqueue_queue_duration_seconds_bucket{controller="widgets",name="widgets",le="1e-06"} 0`,
		`workqueue_queue_duration_seconds_sum{controller="widgets",name="widgets"} 2e-06`,
		`workqueue_work_duration_seconds_bucket{controller="widgets",name="widgets",le="1"} 0`,
		`workqueue_work_duration_seconds_bucket{controller="widgets",name="widgets",le="10"} 1`,
		`workqueue_work_duration_seconds_bucket{controller="widgets",name="widgets",le="1000"} 1`,
		`workqueue_work_duration_seconds_count{controller="widgets",name="widgets"} 1`,
		`# TYPE controller_runtime_reconcile_time_seconds histogram`,
		`# HELP workqueue_depth Current depth of workqueue by workqueue and priority`,
	} {
		if !strings.Contains(page, line+"\n") {
			t.Errorf("page lacks %q; page:\n%s", line, page)
		}
	}
}

// TestControllerMetrics_ActiveWorkers_CountsWorkersInAReconcile: as in
// controller-runtime, controller_runtime_active_workers is 0 on an idle
// controller whatever its MaxConcurrentReconciles, and counts each worker
// between workerStarted and workerStopped, which bracket one Reconcile.
func TestControllerMetrics_ActiveWorkers_CountsWorkersInAReconcile(t *testing.T) {
	m := metrics.New()
	cm := m.Controller("widgets", 4)
	const active = `controller_runtime_active_workers{controller="widgets"}`
	const max = `controller_runtime_max_concurrent_reconciles{controller="widgets"}`
	for i, step := range []struct {
		do   func()
		want string
	}{
		{func() {}, "0"}, // idle: no worker in a Reconcile
		{cm.WorkerStarted, "1"},
		{cm.WorkerStarted, "2"},
		{cm.WorkerStopped, "1"},
		{cm.WorkerStopped, "0"},
	} {
		step.do()
		s := samples(scrapeMetrics(t, m.Handler()))
		if s[active] != step.want || s[max] != "4" {
			t.Errorf("step %d: %s = %q, %s = %q; want %s and 4", i, active, s[active], max, s[max], step.want)
		}
	}
}

// TestMetricsPage_HasTheGoAndProcessCollectors: the page serves the
// series of internal/prom's collectors next to kctl's.
func TestMetricsPage_HasTheGoAndProcessCollectors(t *testing.T) {
	typ, _ := familyDocs(scrapeMetrics(t, metrics.New().Handler()))
	want := map[string]string{"go_goroutines": "gauge", "go_gc_duration_seconds": "summary"}
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		want["process_cpu_seconds_total"] = "counter"
	}
	for name, w := range want {
		if typ[name] != w {
			t.Errorf("# TYPE %s = %q, want %q", name, typ[name], w)
		}
	}
}

func BenchmarkControllerMetrics_Reconciled(b *testing.B) {
	cm := metrics.New().Controller("bench", 1)
	for b.Loop() {
		cm.Reconciled("success", 42*time.Millisecond)
	}
}

func BenchmarkControllerMetrics_Reconciled_Parallel(b *testing.B) {
	cm := metrics.New().Controller("bench", 1)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			cm.Reconciled("success", 42*time.Millisecond)
		}
	})
}

func BenchmarkControllerMetrics_QueueObserver(b *testing.B) {
	cm := metrics.New().Controller("bench", 1)
	for b.Loop() {
		cm.Added()
		cm.Waited(time.Millisecond)
		cm.Worked(time.Millisecond)
	}
}

func BenchmarkMetrics_Scrape_TenControllers(b *testing.B) {
	m := metrics.New()
	for i := range 10 {
		m.Controller(fmt.Sprint("controller-", i), 2).Reconciled("success", time.Second)
		m.AddInformer(fmt.Sprint("resource-", i), func() (int, int64) { return 1000, 1 << 20 })
	}
	for b.Loop() {
		m.Page().WriteTo(io.Discard)
	}
}
