package kctl

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
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

func TestPage_FamiliesAndSeriesInAnyOrder_WrittenSortedWithHelpAndType(t *testing.T) {
	h := newHistogram([]float64{0.1, 1})
	h.observe(0.05)
	h.observe(0.1) // le is inclusive
	h.observe(3)
	p := &page{}
	p.gauge("b_gauge", "A gauge.\nSecond line with a \\.", 2.5, "x", "2")
	p.counter("a_total", "A counter.", 7, "k", "v")
	p.gauge("b_gauge", "A gauge.\nSecond line with a \\.", math.Inf(-1), "x", "1")
	p.histogram("c_seconds", "A histogram.", h, "controller", `q"uote`, "name", "back\\slash\nnewline")
	var b bytes.Buffer
	if err := p.writeTo(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP a_total A counter.
# TYPE a_total counter
a_total{k="v"} 7
# HELP b_gauge A gauge.\nSecond line with a \\.
# TYPE b_gauge gauge
b_gauge{x="1"} -Inf
b_gauge{x="2"} 2.5
# HELP c_seconds A histogram.
# TYPE c_seconds histogram
c_seconds_bucket{controller="q\"uote",name="back\\slash\nnewline",le="0.1"} 2
c_seconds_bucket{controller="q\"uote",name="back\\slash\nnewline",le="1"} 2
c_seconds_bucket{controller="q\"uote",name="back\\slash\nnewline",le="+Inf"} 3
c_seconds_sum{controller="q\"uote",name="back\\slash\nnewline"} 3.15
c_seconds_count{controller="q\"uote",name="back\\slash\nnewline"} 3
`
	if got := b.String(); got != want {
		t.Errorf("page:\n%s\nwant:\n%s", got, want)
	}
}

func TestMetrics_InformersAndLeader_ExactPage(t *testing.T) {
	m := newMetrics()
	m.addInformer("pods/v1", func() (int, int64) { return 3, 4096 })
	m.addInformer("deployments.apps/v1", func() (int, int64) { return 1, 2e9 })
	m.setLeader("kctl-lock", true)
	m.setLeader("other", true)
	m.setLeader("other", false)
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
	if got := onlyFamilies(scrapeMetrics(t, m.handler()), "kctl_", "leader_election_"); got != want {
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
	m := newMetrics()
	cm := m.forController("widgets", 4)
	for _, r := range []string{"success", "success", "error", "requeue", "requeue_after", "success"} {
		cm.reconciled(r, 20*time.Millisecond)
	}
	cm.reconciled("bogus", 0)
	cm.workerStarted()
	cm.workerStarted()
	cm.workerStopped()
	cm.Added()
	cm.Added()
	cm.Retried()
	cm.Waited(2 * time.Microsecond)
	cm.Worked(3 * time.Second)
	cm.setQueue(func() int { return 5 }, func() (int, time.Duration, time.Duration) { return 1, 1500 * time.Millisecond, time.Second })
	if again := m.forController("widgets", 4); again != cm {
		t.Errorf("forController twice returned a new controllerMetrics")
	}
	page := scrapeMetrics(t, m.handler())
	for _, line := range []string{
		`controller_runtime_reconcile_total{controller="widgets",result="error"} 1`,
		`controller_runtime_reconcile_total{controller="widgets",result="requeue"} 1`,
		`controller_runtime_reconcile_total{controller="widgets",result="requeue_after"} 1`,
		`controller_runtime_reconcile_total{controller="widgets",result="success"} 3`,
		`controller_runtime_reconcile_total{controller="widgets",result="bogus"} 1`,
		`controller_runtime_reconcile_errors_total{controller="widgets"} 1`,
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

func TestHistogram_Observe_CountsIntoFirstBucketAtOrAboveValue(t *testing.T) {
	h := newHistogram([]float64{1, 2, 5})
	for i, step := range []struct {
		v    float64
		want []uint64 // cumulative le=1, 2, 5, +Inf
	}{
		{0.5, []uint64{1, 1, 1, 1}},
		{1, []uint64{2, 2, 2, 2}}, // le is inclusive
		{1.0000001, []uint64{2, 3, 3, 3}},
		{5, []uint64{2, 3, 4, 4}},
		{7, []uint64{2, 3, 4, 5}},
		{-3, []uint64{3, 4, 5, 6}},
	} {
		h.observe(step.v)
		if got := h.cumulative(); fmt.Sprint(got) != fmt.Sprint(step.want) {
			t.Errorf("step %d: after observe(%v) cumulative() = %v, want %v", i, step.v, got, step.want)
		}
	}
	if sum := math.Float64frombits(h.sumBits.Load()); math.Abs(sum-11.5000001) > 1e-9 {
		t.Errorf("sum = %v, want 11.5000001", sum)
	}
}

func TestHistogram_ConcurrentObservations_NoneLost(t *testing.T) {
	h := newHistogram(reconcileBuckets)
	const goroutines, each = 8, 1000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				h.observe(0.25) // exact in binary: the sum is exact too
			}
		})
	}
	wg.Wait()
	c := h.cumulative()
	if got := c[len(c)-1]; got != goroutines*each {
		t.Errorf("count = %d, want %d", got, goroutines*each)
	}
	if got := math.Float64frombits(h.sumBits.Load()); got != 0.25*goroutines*each {
		t.Errorf("sum = %v, want %v", got, 0.25*goroutines*each)
	}
}

func TestWorkqueueBuckets_MatchControllerRuntimeLeLabels(t *testing.T) {
	want := []string{"1e-08", "1e-07", "1e-06", "9.999999999999999e-06", "9.999999999999999e-05",
		"0.001", "0.01", "0.1", "1", "10", "100", "1000"}
	var got []string
	for _, b := range workqueueBuckets {
		got = append(got, formatFloat(b))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("workqueue le labels = %v, want %v", got, want)
	}
	if len(reconcileBuckets) != 40 || reconcileBuckets[0] != 0.005 || reconcileBuckets[39] != 60 {
		t.Errorf("reconcileBuckets = %v, want controller-runtime's 40 buckets 0.005..60", reconcileBuckets)
	}
}

func TestEscape_LabelValueAndHelp(t *testing.T) {
	for _, c := range []struct{ in, label, help string }{
		{`plain`, `plain`, `plain`},
		{`a"b`, `a\"b`, `a"b`},
		{`a\b`, `a\\b`, `a\\b`},
		{"a\nb", `a\nb`, `a\nb`},
		{`\n`, `\\n`, `\\n`}, // a literal backslash-n stays two characters
		{"ünï\tcode", "ünï\tcode", "ünï\tcode"},
	} {
		if got := escapeLabel(c.in); got != c.label {
			t.Errorf("escapeLabel(%q) = %q, want %q", c.in, got, c.label)
		}
		if got := escapeHelp(c.in); got != c.help {
			t.Errorf("escapeHelp(%q) = %q, want %q", c.in, got, c.help)
		}
	}
}

func BenchmarkControllerMetrics_Reconciled(b *testing.B) {
	cm := newMetrics().forController("bench", 1)
	for b.Loop() {
		cm.reconciled("success", 42*time.Millisecond)
	}
}

func BenchmarkControllerMetrics_Reconciled_Parallel(b *testing.B) {
	cm := newMetrics().forController("bench", 1)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			cm.reconciled("success", 42*time.Millisecond)
		}
	})
}

func BenchmarkControllerMetrics_QueueObserver(b *testing.B) {
	cm := newMetrics().forController("bench", 1)
	for b.Loop() {
		cm.Added()
		cm.Waited(time.Millisecond)
		cm.Worked(time.Millisecond)
	}
}

func BenchmarkMetrics_Scrape_TenControllers(b *testing.B) {
	m := newMetrics()
	for i := range 10 {
		m.forController(fmt.Sprint("controller-", i), 2).reconciled("success", time.Second)
		m.addInformer(fmt.Sprint("resource-", i), func() (int, int64) { return 1000, 1 << 20 })
	}
	for b.Loop() {
		m.page().writeTo(io.Discard)
	}
}
