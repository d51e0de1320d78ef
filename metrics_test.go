package kctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/controlplane"
	"github.com/kctl-dev/kctl/internal/metrics"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// testBinary returns the path of a Debian package's program, for tests that
// need it. Without it the test skips loudly, or fails when CI=true.
func testBinary(t *testing.T, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("%s not found: install Debian's %s package (make test does: APT_PACKAGES)", name, pkg)
	}
	fmt.Fprintf(os.Stderr, "\n*** SKIPPING %s: %s not found: apt-get install %s ***\n\n", t.Name(), name, pkg)
	t.Skipf("SKIPPING: %s not found: apt-get install %s", name, pkg)
	return ""
}

// busyMetrics is a registry with every kind of series, odd label values included.
func busyMetrics() *metrics.Registry {
	m := metrics.New()
	for _, name := range []string{"widgets", `we"ird\name` + "\n"} {
		cm := m.Controller(name, 2)
		cm.Reconciled("success", 3*time.Millisecond)
		cm.Reconciled("error", 2*time.Second)
		cm.Added()
		cm.Waited(time.Millisecond)
		cm.Worked(time.Minute)
		cm.Retried()
		cm.SetQueue(func() int { return 1 }, func() (int, time.Duration, time.Duration) { return 0, 0, 0 })
	}
	m.AddInformer("pods/v1", func() (int, int64) { return 10, 1 << 20 })
	m.SetLeader("lock", true)
	m.Requests.Answered(http.MethodGet, "127.0.0.1:6443", &http.Response{StatusCode: http.StatusOK})
	m.Requests.Answered(http.MethodPost, "127.0.0.1:6443", nil) // code="<error>"
	m.Requests.Took(http.MethodGet, "127.0.0.1:6443", 30*time.Millisecond)
	u := userMetrics(m)
	jobs, _ := u.Counter("app_jobs_total", "Jobs run, by result.", "result")
	jobs.With("done").Add(3)
	jobs.With(`we"ird\` + "\n").Inc()
	level, _ := u.Gauge("app_level_ratio", "Level.")
	level.Set(0.5)
	took, _ := u.Histogram("app_job_duration_seconds", "Job duration.", nil, "queue")
	took.With("a").Observe(0.3)
	return m
}

func TestMetricsPage_PassesPromtoolCheckMetrics(t *testing.T) {
	promtool := testBinary(t, "promtool", "prometheus")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(scrapeMetrics(t, busyMetrics().Handler()))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestPrometheus_ScrapesPage_QueryReturnsReconcileCount runs a real Prometheus
// server (Debian's prometheus) on loopback that scrapes the page every second,
// then asks its HTTP API for the reconcile count, the program's own counter
// and which of the go_*, process_* and rest_client_* families it stored.
func TestPrometheus_ScrapesPage_QueryReturnsReconcileCount(t *testing.T) {
	m := busyMetrics()
	cm := m.Controller("widgets", 1)
	for range 7 {
		cm.Reconciled("success", time.Millisecond)
	}
	target := httptest.NewServer(m.Handler()) // 127.0.0.1:random
	defer target.Close()
	prom := startPrometheus(t, strings.TrimPrefix(target.URL, "http://"))
	waitForPromQL(t, prom, `controller_runtime_reconcile_total{controller="widgets",result="success"}`, "8") // busyMetrics' 1 + 7
	waitForPromQL(t, prom, `app_jobs_total{result="done"}`, "3")
	waitForPromQL(t, prom, `app_job_duration_seconds_count{queue="a"}`, "1")
	waitForPromQL(t, prom, `rest_client_requests_total{code="<error>",host="127.0.0.1:6443",method="POST"}`, "1")
	waitForFamilies(t, prom, collectorFamilies(t, m))
	waitForFamilies(t, prom, []string{"rest_client_requests_total", "rest_client_request_duration_seconds_bucket"})
}

// collectorFamilies returns the names of the go_* and process_* families
// on m's page, those of internal/prom's collectors.
func collectorFamilies(t *testing.T, m *metrics.Registry) []string {
	typ, _ := familyDocs(scrapeMetrics(t, m.Handler()))
	var names []string
	for name := range typ {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			names = append(names, name)
		}
	}
	return names
}

// waitForFamilies polls Prometheus at addr until it has samples of every
// metric name in names (a histogram's: name_bucket).
func waitForFamilies(t *testing.T, addr string, names []string) {
	t.Helper()
	slices.Sort(names)
	query := `count(count by (__name__) ({__name__=~"` + strings.Join(names, "|") + `"}))`
	waitForPromQL(t, addr, query, strconv.Itoa(len(names)))
}

// startPrometheus runs Debian's prometheus on a free loopback port, scraping
// target (host:port) every second, with its data in a temporary directory.
// It is stopped, by its PID, when the test ends. It returns its address.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	return startPrometheusWith(t, fmt.Sprintf("  - job_name: kctl\n    static_configs:\n      - targets: [%q]\n", target))
}

// startPrometheusWith is startPrometheus with scrapeConfigs, the YAML list
// items of its scrape_configs (indented by two spaces).
func startPrometheusWith(t *testing.T, scrapeConfigs string) string {
	t.Helper()
	bin := testBinary(t, "prometheus", "prometheus")
	dir := t.TempDir()
	config := "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n" + scrapeConfigs
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	logs := &lockedBuffer{}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM) // by PID: only the server this test started
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus output:\n%s", logs)
		}
	})
	return addr
}

// waitForPromQL polls Prometheus at addr until the instant query's first
// sample has the value want.
func waitForPromQL(t *testing.T, addr, query, want string) {
	t.Helper()
	u := "http://" + addr + "/api/v1/query?query=" + url.QueryEscape(query)
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if v, err := promQuery(u); err != nil {
			last = err.Error()
		} else if last = v; v == want {
			return
		}
		time.Sleep(200 * time.Millisecond) // polling a separate process, with a deadline
	}
	t.Fatalf("Prometheus: %s never returned %s within 60s; last answer: %s", query, want, last)
}

// lockedBuffer is a bytes.Buffer for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// promQuery returns the value of the first sample of an instant query.
func promQuery(u string) (string, error) {
	resp, err := http.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string
		Data   struct {
			Result []struct{ Value []any }
		}
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		return "", fmt.Errorf("%d %s", resp.StatusCode, body)
	}
	if len(r.Data.Result) == 0 || len(r.Data.Result[0].Value) != 2 {
		return "", fmt.Errorf("no sample yet: %s", body)
	}
	return fmt.Sprint(r.Data.Result[0].Value[1]), nil
}

// freeLoopbackAddr returns a loopback address held for the test's server
// until the test ends (see controlplane.ReservePorts: a port-0 pick could be
// taken by someone else before the server binds it).
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	held, err := controlplane.ReservePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(held.Release)
	return held.Addr(0)
}

// Manager-level tests: a Manager serving its metrics page and probes on loopback.

// getPage returns the status and body of GET http://addr/path.
func getPage(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// pollPage polls GET http://addr/path until ok accepts the answer, for up to 30s.
func pollPage(t *testing.T, addr, path, what string, ok func(code int, body string) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var code int
	var body string
	for time.Now().Before(deadline) {
		if code, body = getPage(t, addr, path); ok(code, body) {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling a server, with a deadline
	}
	t.Fatalf("GET %s never showed %s within 30s; last answer %d:\n%s", path, what, code, body)
}

func TestManager_AfterKnownReconciles_PageAndPrometheusCountThem(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	metricsAddr := freeLoopbackAddr(t)
	mgr := testManager(t, cfg, ns, Options{})
	if err := mgr.ServeMetrics(metricsAddr); err != nil {
		t.Fatal(err)
	}
	seen, err := mgr.Metrics().Counter("cmcounter_reconciles_total", "Reconcile calls, counted by the program.")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	attempts := map[string]int{}
	calls := map[string]int{} // what Reconcile returned: the expected counters
	NewController[corev1.ConfigMap](mgr, "cm-counter", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		seen.Inc()
		mu.Lock()
		defer mu.Unlock()
		attempts[cm.Name]++
		switch first := attempts[cm.Name] == 1; {
		case cm.Name == "fails-once" && first:
			calls["error"]++
			return Result{}, errors.New("first attempt fails")
		case cm.Name == "requeues-once" && first:
			calls["requeue_after"]++
			return Result{RequeueAfter: 10 * time.Millisecond}, nil
		}
		calls["success"]++
		return Result{}, nil
	}).MaxConcurrentReconciles(2)
	cms := NewClient[corev1.ConfigMap](mustConn(t, cfg))
	for _, name := range []string{"ok-a", "ok-b", "fails-once", "requeues-once"} {
		if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	startManager(t, mgr)

	// 4 objects: 4 successes, plus the failed and the requeued first attempts.
	const c = `{controller="cm-counter"}`
	want := map[string]string{
		`controller_runtime_reconcile_total{controller="cm-counter",result="success"}`:        "4",
		`controller_runtime_reconcile_total{controller="cm-counter",result="error"}`:          "1",
		`controller_runtime_reconcile_total{controller="cm-counter",result="requeue_after"}`:  "1",
		`controller_runtime_reconcile_total{controller="cm-counter",result="requeue"}`:        "0",
		`controller_runtime_reconcile_errors_total` + c:                                       "1",
		`controller_runtime_reconcile_time_seconds_count` + c:                                 "6",
		`controller_runtime_reconcile_time_seconds_bucket{controller="cm-counter",le="+Inf"}`: "6",
		`controller_runtime_max_concurrent_reconciles` + c:                                    "2",
		`controller_runtime_active_workers` + c:                                               "0", // idle: no worker in a Reconcile
		`workqueue_retries_total{controller="cm-counter",name="cm-counter"}`:                  "1",
		`workqueue_work_duration_seconds_count{controller="cm-counter",name="cm-counter"}`:    "6",
		`workqueue_depth{controller="cm-counter",name="cm-counter"}`:                          "0",
		`kctl_cache_objects{resource="configmaps/v1"}`:                                        "4",
	}
	var page map[string]string
	pollPage(t, metricsAddr, "/metrics", "6 reconciles", func(code int, body string) bool {
		page = map[string]string{}
		for _, line := range strings.Split(body, "\n") {
			if k, v, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(line, "#") {
				page[k] = v
			}
		}
		return page[`controller_runtime_reconcile_time_seconds_count`+c] == "6"
	})
	mu.Lock()
	for result, n := range calls {
		want[`controller_runtime_reconcile_total{controller="cm-counter",result="`+result+`"}`] = strconv.Itoa(n)
	}
	mu.Unlock()
	for k, v := range want {
		if page[k] != v {
			t.Errorf("%s = %q, want %s", k, page[k], v)
		}
	}

	// kctl's own requests on the Manager's Conn: the informer's
	// watch-list stream (a watch: counted, not timed), and one Get of a
	// missing object, the only 404.
	host := mgr.conn.transport.Base.Host
	if _, err := NewClient[corev1.ConfigMap](mgr.conn).Get(t.Context(), ns, "missing"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a missing ConfigMap = %v, want NotFound", err)
	}
	_, body := getPage(t, metricsAddr, "/metrics")
	s := samples(body)
	if got := s[`rest_client_requests_total{code="404",host="`+host+`",method="GET"}`]; got != "1" {
		t.Errorf("rest_client_requests_total for the one 404 = %q, want 1", got)
	}
	if got := value(t, s, `rest_client_requests_total{code="200",host="`+host+`",method="GET"}`); got < 1 {
		t.Errorf("rest_client_requests_total of 200 GETs = %v, want at least the watch-list stream", got)
	}
	if got := value(t, s, `rest_client_request_duration_seconds_count{host="`+host+`",verb="GET"}`); got < 1 {
		t.Errorf("rest_client_request_duration_seconds_count of GETs = %v, want at least the 404", got)
	}
	if got := value(t, s, "cmcounter_reconciles_total"); got != 6 {
		t.Errorf("the program's cmcounter_reconciles_total = %v, want 6", got)
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		_, body := getPage(t, metricsAddr, "/metrics")
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics on the Manager's page: %v\n%s", err, out)
		}
	}

	prom := startPrometheus(t, metricsAddr)
	waitForPromQL(t, prom, `sum(controller_runtime_reconcile_total{controller="cm-counter"})`, "6")
	waitForPromQL(t, prom, `cmcounter_reconciles_total`, "6")
	waitForPromQL(t, prom, `rest_client_requests_total{code="404",method="GET"}`, "1")
	waitForFamilies(t, prom, []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "process_resident_memory_bytes",
		"rest_client_request_duration_seconds_bucket"})
}
