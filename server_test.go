package kctl

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/metricsauth"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestManager_Servers_SetTimeoutsAndServeOnlyTheirPaths: every server the
// Manager runs reports (in its "serving" log line) a read and a write
// timeout, and each answers only on its own paths (kctl/webhook's and
// kctl/debug's servers: in their packages' tests).
func TestManager_Servers_SetTimeoutsAndServeOnlyTheirPaths(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	logs := &logBuffer{}
	mgr := testManager(t, cfg, ns, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	metricsAddr, healthAddr, userAddr := freeLoopbackAddr(t), freeLoopbackAddr(t), freeLoopbackAddr(t)
	for _, err := range []error{
		mgr.ServeMetrics(metricsAddr),
		mgr.ServeHealth(healthAddr),
		mgr.Add(HTTPServer("user", userAddr, http.NotFoundHandler())),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	startManager(t, mgr)
	lines := logs.linesEventually(t, `msg="serving `, 3)
	timeouts := regexp.MustCompile(`readTimeout=([0-9][^ ]*) writeTimeout=([0-9][^ ]*)`)
	for _, l := range lines {
		m := timeouts.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("a server without timeouts: %s", l)
			continue
		}
		for _, v := range m[1:] {
			if d, err := time.ParseDuration(v); err != nil || d <= 0 {
				t.Errorf("a server with timeout %q: %s", v, l)
			}
		}
	}

	for _, tc := range []struct {
		addr, path string
		code       int
		body       string
	}{
		{metricsAddr, "/metrics", 200, "go_goroutines"},
		{metricsAddr, "/metrics/anything", 404, ""},
		{metricsAddr, "/metricsx", 404, ""},
		{metricsAddr, "/", 404, ""},
		{healthAddr, "/readyz", 200, "ok"},
		{healthAddr, "/metrics", 404, ""},
		{userAddr, "/", 404, ""},
	} {
		if code, body := getPage(t, tc.addr, tc.path); code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("GET %s = %d %.200q, want %d containing %q", tc.path, code, body, tc.code, tc.body)
		}
	}
}

// TestManager_ServingPackagesAPI_MisuseAndDrainDeadline: what kctl/webhook
// uses of a Manager. A mistake reported with ReportMisuse is what Start
// returns, starting nothing; DrainDeadline is zero until the Manager's
// context ends, then ShutdownTimeout less its reserve after that.
func TestManager_ServingPackagesAPI_MisuseAndDrainDeadline(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	bad := testManager(t, cfg, ns, Options{})
	bad.ReportMisuse(errors.New("kctl: the widget hook is registered twice"))
	if err := bad.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "registered twice") {
		t.Errorf("Start after ReportMisuse = %v, want the mistake", err)
	}

	mgr := testManager(t, cfg, ns, Options{ShutdownTimeout: 10 * time.Second})
	if d := mgr.DrainDeadline(); !d.IsZero() {
		t.Errorf("DrainDeadline before Start = %v, want zero", d)
	}
	type seen struct{ at, deadline time.Time }
	running := make(chan struct{})
	got := make(chan seen, 1)
	err := mgr.Add(Runnable{Name: "drainer", Run: func(ctx context.Context) error {
		close(running)
		<-ctx.Done()
		got <- seen{time.Now(), mgr.DrainDeadline()}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	stop := startManager(t, mgr)
	<-running
	if d := mgr.DrainDeadline(); !d.IsZero() {
		t.Errorf("DrainDeadline while running = %v, want zero", d)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := <-got
	// reserve = min(10s/5, 2s) = 2s: the deadline is 8s after the end.
	if left := s.deadline.Sub(s.at); left < 7*time.Second || left > 8500*time.Millisecond {
		t.Errorf("DrainDeadline after the context ended = %v from then, want about 8s", left)
	}
}

// probeWidget's CRD is installed by TestManager_Readyz_503NamingMissingCRDThen200AfterSync.
type probeWidget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              map[string]string `json:"spec,omitempty"`
}

var _ = Declare[probeWidget](Resource{Group: "probe.metricstest.kctl.dev", Version: "v1", Kind: "ProbeWidget", Namespaced: true})

const probeWidgetCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"probewidgets.probe.metricstest.kctl.dev"},
 "spec":{"group":"probe.metricstest.kctl.dev","scope":"Namespaced",
  "names":{"plural":"probewidgets","singular":"probewidget","kind":"ProbeWidget","listKind":"ProbeWidgetList"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

func TestManager_Readyz_503NamingMissingCRDThen200AfterSync(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	defer testCRDAbsent(t, cfg, ns, "probe.metricstest.kctl.dev", "v1", "probewidgets")() // not t.Cleanup: t.Context() has ended by then

	healthAddr := freeLoopbackAddr(t)
	mgr := testManager(t, cfg, ns, Options{})
	if err := mgr.ServeHealth(healthAddr); err != nil {
		t.Fatal(err)
	}
	NewController[probeWidget](mgr, "probe-widgets", func(context.Context, *probeWidget) (Result, error) { return Result{}, nil })
	startManager(t, mgr)

	pollPage(t, healthAddr, "/readyz?verbose", "503 naming the missing CRD", func(code int, body string) bool {
		return code == 503 && strings.Contains(body, "probewidgets.probe.metricstest.kctl.dev/v1") && strings.Contains(body, "not installed")
	})
	if code, body := getPage(t, healthAddr, "/healthz"); code != 200 || body != "ok" {
		t.Errorf("GET /healthz while not ready = %d %q, want 200 ok: liveness must not follow readiness", code, body)
	}
	if code, body := testRawRequest(t, cfg, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", probeWidgetCRD); code != 201 {
		t.Fatalf("creating the CRD: %d %s", code, body)
	}
	pollPage(t, healthAddr, "/readyz", "200 ok after the cache synced", func(code int, body string) bool {
		return code == 200 && body == "ok"
	})
	if code, body := getPage(t, healthAddr, "/readyz?verbose"); code != 200 || !strings.Contains(body, "[+]") {
		t.Errorf("GET /readyz?verbose = %d %q, want 200 listing the checks", code, body)
	}
}

// metricsReaderRole is the ClusterRole that ServeSecureMetrics documents.
const metricsReaderRole = `"rules":[{"nonResourceURLs":["/metrics"],"verbs":["get"]}]`

// managerFixture is a Manager of its own namespace.
type managerFixture struct {
	cfg *rest.Config
	ns  string
	mgr *Manager
}

// serviceAccountToken creates ServiceAccount name in ns and returns a
// token of it from the TokenRequest API.
func serviceAccountToken(t *testing.T, f *managerFixture, name string) string {
	t.Helper()
	sa := fmt.Sprintf(`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":%q}}`, name)
	if code, body := testRawRequest(t, f.cfg, "POST", "/api/v1/namespaces/"+f.ns+"/serviceaccounts", sa); code != 201 {
		t.Fatalf("creating ServiceAccount %s: %d %s", name, code, body)
	}
	code, body := testRawRequest(t, f.cfg, "POST", "/api/v1/namespaces/"+f.ns+"/serviceaccounts/"+name+"/token",
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":3600}}`)
	if code != 201 {
		t.Fatalf("TokenRequest for %s: %d %s", name, code, body)
	}
	var tr struct{ Status struct{ Token string } }
	json.Unmarshal(body, &tr)
	return tr.Status.Token
}

// scrape GETs https://addr/metrics with token ("" sends none), trusting
// any certificate (ServeSecureMetrics made a self-signed one).
func scrape(t *testing.T, addr, token string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", "https://"+addr+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSecureMetrics_RealPrometheusWithServiceAccountToken: a Prometheus
// scrapes with a ServiceAccount token bound to the documented ClusterRole;
// a token without it gets 403, none or a bad one 401, and neither sees the
// page. Removing the binding takes effect once the cached verdict expires.
func TestSecureMetrics_RealPrometheusWithServiceAccountToken(t *testing.T) {
	f := &managerFixture{cfg: testConfig(t)}
	f.ns = testNamespace(t, f.cfg)
	f.mgr = testManager(t, f.cfg, f.ns, Options{})
	addr := freeLoopbackAddr(t)
	if err := f.mgr.ServeSecureMetrics(addr, ""); err != nil {
		t.Fatal(err)
	}
	startManager(t, f.mgr)
	allowed := serviceAccountToken(t, f, "prometheus")
	denied := serviceAccountToken(t, f, "nobody")
	role := "kctl-test-metrics-reader-" + f.ns
	roles := "/apis/rbac.authorization.k8s.io/v1/clusterroles"
	bindings := "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
	if code, body := testRawRequest(t, f.cfg, "POST", roles, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"`+role+`"},`+metricsReaderRole+`}`); code != 201 {
		t.Fatalf("creating the ClusterRole: %d %s", code, body)
	}
	defer testRawRequest(t, f.cfg, "DELETE", roles+"/"+role, "")
	binding := fmt.Sprintf(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":%q},
		"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":%q},
		"subjects":[{"kind":"ServiceAccount","name":"prometheus","namespace":%q}]}`, role, role, f.ns)
	if code, body := testRawRequest(t, f.cfg, "POST", bindings, binding); code != 201 {
		t.Fatalf("creating the ClusterRoleBinding: %d %s", code, body)
	}
	defer testRawRequest(t, f.cfg, "DELETE", bindings+"/"+role, "")

	eventually(t, "the secure metrics server answering", func() bool {
		code, _ := scrape(t, addr, allowed)
		return code == 200
	})
	for _, tc := range []struct {
		who, token string
		code       int
	}{{"no token", "", 401}, {"a token the API server rejects", "not-a-token", 401}, {"a token without the ClusterRole", denied, 403}, {"the Prometheus token", allowed, 200}} {
		code, body := scrape(t, addr, tc.token)
		if code != tc.code || (code != 200) == strings.Contains(body, "go_goroutines") {
			t.Errorf("GET /metrics with %s = %d %.100q, want %d, with the page only on 200", tc.who, code, body, tc.code)
		}
	}

	dir := t.TempDir()
	for name, token := range map[string]string{"allowed": allowed, "denied": denied} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	job := func(name string) string {
		return fmt.Sprintf("  - job_name: %s\n    scheme: https\n    tls_config: {insecure_skip_verify: true}\n"+
			"    authorization: {credentials_file: %q}\n    static_configs:\n      - targets: [%q]\n", name, filepath.Join(dir, name), addr)
	}
	prom := startPrometheusWith(t, job("allowed")+job("denied"))
	waitForPromQL(t, prom, `up{job="allowed"}`, "1")
	waitForPromQL(t, prom, `count(go_goroutines{job="allowed"})`, "1")
	waitForPromQL(t, prom, `up{job="denied"}`, "0")

	testRawRequest(t, f.cfg, "DELETE", bindings+"/"+role, "")
	eventually(t, "403 once the binding is gone and the cached verdict expired", func() bool {
		code, _ := scrape(t, addr, allowed)
		return code == 403
	})
}

// ServeSecureMetrics under a flood of tokens the API server rejects (issue
// 33, item 3): the flood must not slow the Manager's own requests, evict a
// real scraper's verdict, or cost a review per request.

// reviewCount counts the TokenReviews a Manager sends, by token, seen on
// the wire (cfg.Wrap), whichever connection sends them.
type reviewCount struct {
	mu      sync.Mutex
	byToken map[string]int
	total   int
}

// countReviews makes cfg's requests count the TokenReviews they send.
func countReviews(cfg *rest.Config) *reviewCount {
	c := &reviewCount{byToken: map[string]int{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/tokenreviews") {
				body, err := io.ReadAll(r.Body)
				if err != nil {
					return nil, err
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				var tr struct{ Spec struct{ Token string } }
				json.Unmarshal(body, &tr)
				c.mu.Lock()
				c.byToken[tr.Spec.Token]++
				c.total++
				c.mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	})
	return c
}

// of returns how many TokenReviews of token were sent.
func (c *reviewCount) of(token string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byToken[token]
}

// all returns how many TokenReviews were sent.
func (c *reviewCount) all() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// scraper sends GET /metrics to a secure metrics server, reusing its
// connections, as many at once as the test asks.
type scraper struct {
	addr   string
	client *http.Client
}

func newScraper(addr string, conns int) *scraper {
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true},
		MaxIdleConnsPerHost: conns,
	}
	return &scraper{addr: addr, client: &http.Client{Timeout: 30 * time.Second, Transport: tr}}
}

// get scrapes with token and returns the status code and the Retry-After
// header (0 if the request failed).
func (s *scraper) get(ctx context.Context, token string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, "GET", "https://"+s.addr+"/metrics", nil)
	if err != nil {
		return 0, ""
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// garbage is a token no API server accepts, new on every call.
var garbageSeq atomic.Int64

func garbage() string { return "garbage-" + strconv.FormatInt(garbageSeq.Add(1), 10) }

// floodCodes counts a flood's answers by status code.
type floodCodes struct {
	mu         sync.Mutex
	codes      map[int]int
	retryAfter map[string]int
}

func (f *floodCodes) add(code int, retryAfter string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.codes[code]++
	if code == http.StatusTooManyRequests {
		f.retryAfter[retryAfter]++
	}
}

// total is the number of answers.
func (f *floodCodes) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.codes {
		n += c
	}
	return n
}

func (f *floodCodes) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprint(f.codes)
}

// flood sends n scrapes with new garbage tokens from workers goroutines at
// once, and returns when all are answered.
func flood(s *scraper, workers, n int) *floodCodes {
	f := &floodCodes{codes: map[int]int{}, retryAfter: map[string]int{}}
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				f.add(s.get(context.Background(), garbage()))
			}
		})
	}
	wg.Wait()
	return f
}

// floodUntil scrapes with new garbage tokens from workers goroutines, each
// one scrape at a time, at most one every pace, until ctx ends; wait
// returns its answers.
func floodUntil(ctx context.Context, s *scraper, workers int, pace time.Duration) (f *floodCodes, wait func()) {
	f = &floodCodes{codes: map[int]int{}, retryAfter: map[string]int{}}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			tick := time.NewTicker(pace)
			defer tick.Stop()
			for ctx.Err() == nil {
				code, ra := s.get(ctx, garbage())
				if ctx.Err() == nil {
					f.add(code, ra)
				}
				select {
				case <-tick.C:
				case <-ctx.Done():
				}
			}
		})
	}
	return f, wg.Wait
}

// secureMetricsFixture is a started Manager serving secure metrics, whose
// TokenReviews are counted, and a ServiceAccount token allowed to scrape.
type secureMetricsFixture struct {
	managerFixture
	addr    string
	reviews *reviewCount
	allowed string
}

// newSecureMetricsFixture starts it; configure adjusts the Manager's
// config (its rate limit) and add the Manager before Start.
func newSecureMetricsFixture(t *testing.T, configure func(*rest.Config), add func(*Manager)) *secureMetricsFixture {
	t.Helper()
	f := &secureMetricsFixture{}
	f.cfg = testConfig(t)
	f.ns = testNamespace(t, f.cfg)
	mcfg := rest.CopyConfig(f.cfg)
	configure(mcfg)
	f.reviews = countReviews(mcfg)
	f.mgr = testManager(t, mcfg, f.ns, Options{})
	f.addr = freeLoopbackAddr(t)
	if err := f.mgr.ServeSecureMetrics(f.addr, ""); err != nil {
		t.Fatal(err)
	}
	add(f.mgr)
	startManager(t, f.mgr)
	f.allowed = serviceAccountToken(t, &f.managerFixture, "prometheus")
	role := "kctl-test-metrics-reader-" + f.ns
	roles := "/apis/rbac.authorization.k8s.io/v1/clusterroles"
	bindings := "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
	if code, body := testRawRequest(t, f.cfg, "POST", roles, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"`+role+`"},`+metricsReaderRole+`}`); code != 201 {
		t.Fatalf("creating the ClusterRole: %d %s", code, body)
	}
	t.Cleanup(func() { deleteRaw(t, f.cfg, roles+"/"+role) })
	binding := fmt.Sprintf(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":%q},
		"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":%q},
		"subjects":[{"kind":"ServiceAccount","name":"prometheus","namespace":%q}]}`, role, role, f.ns)
	if code, body := testRawRequest(t, f.cfg, "POST", bindings, binding); code != 201 {
		t.Fatalf("creating the ClusterRoleBinding: %d %s", code, body)
	}
	t.Cleanup(func() { deleteRaw(t, f.cfg, bindings+"/"+role) })
	s := newScraper(f.addr, 1)
	eventually(t, "the ServiceAccount allowed to scrape", func() bool {
		code, _ := s.get(t.Context(), f.allowed)
		return code == 200
	})
	return f
}

// deleteRaw deletes path, in a Cleanup (when t.Context has ended).
func deleteRaw(t *testing.T, cfg *rest.Config, path string) {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Errorf("client for %s: %v", cfg.Host, err)
		return
	}
	req, _ := http.NewRequest("DELETE", strings.TrimSuffix(cfg.Host, "/")+path, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Errorf("DELETE %s: %v", path, err)
		return
	}
	resp.Body.Close()
}

// noRateLimit lifts the Manager's client-side rate limit, so that a flood
// reaches the reviews as fast as the API server answers.
func noRateLimit(cfg *rest.Config) { cfg.QPS = -1 }

// TestSecureMetrics_GarbageFlood_KeepsAScrapersVerdictForItsTTL: a flood
// of more new tokens than the cache holds neither evicts a real scraper's
// verdict nor a rejected token's within their TTLs: neither token is
// reviewed again (issue 33: a full cache was cleared whole), and the
// rejected token is reviewed again only once its 5 s are over. The
// Manager's own rate limit is off, so that the flood goes as fast as the
// reviews let it: 1000 tokens first, then the two verdicts, then 200
// more tokens, past the 1024 the cache holds.
func TestSecureMetrics_GarbageFlood_KeepsAScrapersVerdictForItsTTL(t *testing.T) {
	f := newSecureMetricsFixture(t, noRateLimit, func(*Manager) {})
	s := newScraper(f.addr, 50)
	start := time.Now()
	codes := flood(s, 50, 1000)
	t.Logf("1000 garbage tokens: %s, %d TokenReviews in all, in %v", codes, f.reviews.all(), time.Since(start))
	start = time.Now()
	rejected := garbage()
	firstReview := time.Now()
	for _, tc := range []struct {
		who, token string
		code       int
	}{{"a garbage token", rejected, 401}, {"the allowed token", f.allowed, 200}} {
		eventually(t, tc.who+" answered past the review bound", func() bool {
			code, _ := s.get(t.Context(), tc.token)
			return code == tc.code
		})
	}
	allowedBefore := f.reviews.of(f.allowed)
	codes = flood(s, 50, 200)
	t.Logf("200 more garbage tokens: %s, %d TokenReviews in all", codes, f.reviews.all())
	for _, tc := range []struct {
		who, token string
		code       int
		reviews    int
	}{{"the allowed token", f.allowed, 200, allowedBefore}, {"the rejected token", rejected, 401, 1}} {
		if code, _ := s.get(t.Context(), tc.token); code != tc.code {
			t.Errorf("GET /metrics with %s after the flood = %d, want %d", tc.who, code, tc.code)
		}
		if n := f.reviews.of(tc.token); n != tc.reviews {
			t.Errorf("%s was reviewed %d times, want %d: the flood evicted its verdict", tc.who, n, tc.reviews)
		}
	}
	// The verdicts kept must still have been within their TTLs.
	if took := time.Since(start); took > metricsauth.RejectedTTL {
		t.Fatalf("the verdicts were %v old, past the rejected token's TTL: this machine is too slow for the test", took)
	}
	// The rejected token is remembered briefly: reviewed again once its
	// verdict has expired, not before.
	eventually(t, "the rejected token reviewed again", func() bool {
		s.get(t.Context(), rejected)
		return f.reviews.of(rejected) == 2
	})
	if after := time.Since(firstReview); after < metricsauth.RejectedTTL {
		t.Errorf("the rejected token was reviewed again %v after the first time, want at least its TTL %v", after, metricsauth.RejectedTTL)
	}
}

// TestSecureMetrics_GarbageFlood_IsAnswered429PastTheReviewBound: tokens
// the cache does not know are reviewed at most metricsauth.ReviewRate a second (after
// a burst of metricsauth.ReviewBurst); past that they are answered 429 with a
// Retry-After, while a scraper the API server has authenticated keeps
// being answered 200, reviewed once a TTL, and never 429 (issue 33).
func TestSecureMetrics_GarbageFlood_IsAnswered429PastTheReviewBound(t *testing.T) {
	f := newSecureMetricsFixture(t, noRateLimit, func(*Manager) {})
	ctx, stop := context.WithCancel(t.Context())
	start := time.Now()
	before := f.reviews.all()
	allowedBefore := f.reviews.of(f.allowed)
	codes, wait := floodUntil(ctx, newScraper(f.addr, 20), 20, time.Nanosecond)
	prom := newScraper(f.addr, 1)
	var promCodes []int
	// the allowed token's verdict expires once in 10 s; 12 s see one renewal.
	for time.Since(start) < 12*time.Second {
		code, _ := prom.get(t.Context(), f.allowed)
		promCodes = append(promCodes, code)
		time.Sleep(200 * time.Millisecond) // the pace of a scraper, not a synchronisation
	}
	stop()
	wait()
	took := time.Since(start)
	renewed := f.reviews.of(f.allowed) - allowedBefore
	reviewed := f.reviews.all() - before - renewed
	t.Logf("a flood of %v: %s; %d garbage TokenReviews; the scraper's answers %v", took, codes, reviewed, promCodes)
	if codes.codes[http.StatusTooManyRequests] == 0 || codes.retryAfter["1"] != codes.codes[http.StatusTooManyRequests] {
		t.Errorf("a flood of garbage tokens was answered %s, Retry-After %v; want 429s with Retry-After: 1", codes, codes.retryAfter)
	}
	if bound := metricsauth.ReviewBurst + int(took.Seconds()+1)*metricsauth.ReviewRate; reviewed > bound {
		t.Errorf("%d garbage tokens reviewed in %v, want at most %d (burst %d, %d a second)", reviewed, took, bound, metricsauth.ReviewBurst, metricsauth.ReviewRate)
	}
	if slices.ContainsFunc(promCodes, func(c int) bool { return c != 200 }) {
		t.Errorf("the allowed scraper was answered %v during the flood, want 200 only", promCodes)
	}
	// Its verdict, 0-10 s old at the start, expires once or twice in 12 s.
	if renewed < 1 || renewed > 2 {
		t.Errorf("the allowed token was reviewed %d times in %v, want 1 or 2 (once a 10 s TTL)", renewed, took)
	}
}

// TestSecureMetrics_GarbageFlood_LeavesTheManagersLatency: 200 scrapers
// with new garbage tokens, each scraping once a second, leave the
// Manager's own requests (its API reads, its cached reads after a write,
// and a write's way to its reconcile) within 2x of their idle latency
// (issue 33: the reviews shared the Manager's rate limit, and its reads
// took 0.64-0.72 s). 200 scrapes a second are more than the same
// scrapers got answered before the fix (about 85 a second here), but
// not a tight loop: in this one process on a shared machine, that only
// measures how the scrapers and the server share the CPU.
func TestSecureMetrics_GarbageFlood_LeavesTheManagersLatency(t *testing.T) {
	var seen atomic.Int64
	var cms *Client[corev1.ConfigMap]
	var direct *Client[corev1.ConfigMap]
	f := newSecureMetricsFixture(t, func(*rest.Config) {}, func(mgr *Manager) {
		cms = ClientFor[corev1.ConfigMap](mgr)
		direct = NewClient[corev1.ConfigMap](mgr.conn)
		NewController(mgr, "latency", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
			n, _ := strconv.ParseInt(cm.Data["seq"], 10, 64)
			seen.Store(n)
			return Result{}, nil
		})
	})
	ctx := t.Context()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "probe"}, Data: map[string]string{"seq": "0"}}
	if err := cms.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	seq := int64(0)
	// sample times the three, samples times each.
	sample := func(samples int) (api, cached, reconcile time.Duration) {
		t.Helper()
		var apis, cacheds, reconciles []time.Duration
		for range samples {
			seq++
			cm.Data["seq"] = strconv.FormatInt(seq, 10)
			t0 := time.Now()
			if err := cms.Update(ctx, cm); err != nil {
				t.Fatal(err)
			}
			for seen.Load() < seq {
				time.Sleep(200 * time.Microsecond) // polling for the reconcile, bounded below
				if time.Since(t0) > 30*time.Second {
					t.Fatalf("the reconcile of seq %d did not come within 30 s", seq)
				}
			}
			reconciles = append(reconciles, time.Since(t0))
			t1 := time.Now()
			if _, err := cms.Get(ctx, f.ns, "probe"); err != nil {
				t.Fatal(err)
			}
			cacheds = append(cacheds, time.Since(t1))
			t2 := time.Now()
			if _, err := direct.Get(ctx, f.ns, "probe"); err != nil {
				t.Fatal(err)
			}
			apis = append(apis, time.Since(t2))
		}
		return median(apis), median(cacheds), median(reconciles)
	}
	const scrapers = 200
	sample(5) // warm up
	idleAPI, idleCached, idleReconcile := sample(25)
	floodCtx, stop := context.WithCancel(ctx)
	codes, wait := floodUntil(floodCtx, newScraper(f.addr, scrapers), scrapers, time.Second)
	// past the scrapers' TLS handshakes, which are not the load measured
	eventually(t, "every scraper answered", func() bool { return codes.total() >= 2*scrapers })
	loadAPI, loadCached, loadReconcile := sample(25)
	stop()
	wait()
	t.Logf("%d garbage scrapers: %s", scrapers, codes)
	for _, tc := range []struct {
		what       string
		idle, load time.Duration
	}{{"an API read", idleAPI, loadAPI}, {"a cached read after a write", idleCached, loadCached}, {"a write until its reconcile", idleReconcile, loadReconcile}} {
		t.Logf("%s: median %v idle, %v under the flood", tc.what, tc.idle, tc.load)
		// 2x, or 5 ms more, whichever is larger: the machine is shared.
		if limit := max(2*tc.idle, tc.idle+5*time.Millisecond); tc.load > limit {
			t.Errorf("%s took a median %v under the flood, %v idle: want at most %v", tc.what, tc.load, tc.idle, limit)
		}
	}
}

// median returns the middle of ds (which it sorts).
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// WithLivenessBound: a worker held by a reconcile that ignores its
// context is not a wedge while no key waits; once a key waits and no
// reconcile has finished for the bound, /healthz fails naming the
// controller and the key in flight, and it passes again once the worker
// comes free. Readiness does not follow it.
func TestController_WithLivenessBound_HealthzFailsWhileWedged(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	healthAddr := freeLoopbackAddr(t)
	mgr := testManager(t, cfg, ns, Options{})
	if err := mgr.ServeHealth(healthAddr); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	c := NewController(mgr, "wedge", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		if cm.Name == "stuck" {
			started <- struct{}{}
			<-release // ignores ctx, as a call without a deadline does
		}
		return Result{}, nil
	}).MaxConcurrentReconciles(1).WithLivenessBound(300 * time.Millisecond)
	startManager(t, mgr)
	conn, err := NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := NewClient[corev1.ConfigMap](conn)
	defer close(release)
	if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stuck"}}); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := c.wedged(300*time.Millisecond, time.Now().Add(time.Hour)); err != nil {
		t.Errorf("an hour on, with every worker busy but no key waiting: %v, want not wedged", err)
	}
	if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "next"}}); err != nil {
		t.Fatal(err)
	}
	pollPage(t, healthAddr, "/healthz?verbose", "503 naming the wedged controller and its key", func(code int, body string) bool {
		return code == 503 && strings.Contains(body, `[-]controller-wedge failed: controller "wedge" is wedged: 1 keys wait, all 1 workers busy`) &&
			strings.Contains(body, "reconciling "+ns+"/stuck (for ")
	})
	if code, body := getPage(t, healthAddr, "/readyz"); code != 200 {
		t.Errorf("GET /readyz while wedged = %d %q, want 200: readiness does not follow liveness", code, body)
	}
	release <- struct{}{}
	pollPage(t, healthAddr, "/healthz", "200 once the worker is free", func(code int, body string) bool {
		return code == 200 && body == "ok"
	})
}
