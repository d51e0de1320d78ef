package kctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/controlplane"
	"github.com/kctl-dev/kctl/internal/metrics"
	"github.com/kctl-dev/kctl/internal/transport"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestClient_FaultInjection_TooManyRequests_IsRetriedThenGivesUp(t *testing.T) {
	var calls, failures atomic.Int32
	failures.Store(2)
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= failures.Load() {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", mediaJSON)
		w.Write([]byte(`{"metadata":{"name":"a","namespace":"ns"}}`))
	})
	g := NewClient[gizmo](conn)
	if obj, err := g.Get(t.Context(), "ns", "a"); err != nil || obj.Name != "a" || calls.Load() != 3 {
		t.Errorf("Get after two 429s = %v, %v after %d calls; want the object after 3 calls", obj, err, calls.Load())
	}
	calls.Store(0)
	failures.Store(1000)
	if _, err := g.Get(t.Context(), "ns", "a"); !apierrors.IsTooManyRequests(err) || calls.Load() != transport.MaxRetries+1 {
		t.Errorf("Get always answered 429: err = %v after %d calls; want TooManyRequests after %d", err, calls.Load(), transport.MaxRetries+1)
	}
}

func TestClient_FaultInjection_TooManyRequests_WaitHonorsTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
		cancel()
	})
	start := time.Now()
	_, err := NewClient[gizmo](conn).Get(ctx, "ns", "a")
	if !errors.Is(err, context.Canceled) || time.Since(start) > 10*time.Second {
		t.Errorf("Get with a canceled context during Retry-After: err = %v after %v", err, time.Since(start))
	}
}

// A 429 with Retry-After: 1 is retried one second later, not at once.
func TestClient_FaultInjection_TooManyRequestsRetryAfterOne_RetriesASecondLater(t *testing.T) {
	var mu sync.Mutex
	var arrivals []time.Time
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		n := len(arrivals)
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", mediaJSON)
		w.Write([]byte(`{"metadata":{"name":"a","namespace":"ns"}}`))
	})
	obj, err := NewClient[gizmo](conn).Get(t.Context(), "ns", "a")
	if err != nil || obj.Name != "a" {
		t.Fatalf("Get after a 429 = %v, %v; want the object", obj, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != 2 || arrivals[1].Sub(arrivals[0]) < time.Second {
		t.Errorf("%d requests, %v apart; want the retry at least 1s after the 429 with Retry-After: 1", len(arrivals), arrivals[len(arrivals)-1].Sub(arrivals[0]))
	}
}

// blackhole is a fault-injecting TCP proxy on loopback in front of the real
// kube-apiserver (a real server cannot go silent on demand). While up it
// relays bytes both ways. silence makes every connection open at the time,
// and every one accepted until restore, silent for good: what it reads is
// dropped, and nothing, not even a close, reaches the other side, as when
// a dead NAT entry or a stuck proxy eats a connection. A client closing its
// side still closes the proxy's.
type blackhole struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	silent   bool
	conns    map[*relay]bool
	wg       sync.WaitGroup
}

// relay is one client connection and its connection to the server.
type relay struct {
	client, server net.Conn
	// silenced: drop what either side sends.
	silenced atomic.Bool
}

// newBlackhole starts a proxy to cfg's server and returns a copy of cfg
// that reaches the server through it, speaking HTTP/1.1 only (its TLS
// offers no h2, so HTTP/2's connection health check is out of play).
func newBlackhole(t *testing.T, cfg *rest.Config) (*blackhole, *rest.Config) {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln, upstream: u.Host, conns: map[*relay]bool{}}
	b.wg.Go(b.accept)
	t.Cleanup(b.close)
	proxied := rest.CopyConfig(cfg)
	proxied.Host = "https://" + ln.Addr().String()
	proxied.NextProtos = []string{"http/1.1"}
	return b, proxied
}

func (b *blackhole) accept() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", b.upstream)
		if err != nil {
			c.Close()
			continue
		}
		r := &relay{client: c, server: s}
		b.mu.Lock()
		r.silenced.Store(b.silent)
		b.conns[r] = true
		b.mu.Unlock()
		b.wg.Go(func() { b.pipe(r, c, s, true) })
		b.wg.Go(func() { b.pipe(r, s, c, false) })
	}
}

// pipe copies from src to dst until src ends; fromClient says which way.
func (b *blackhole) pipe(r *relay, src, dst net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !r.silenced.Load() {
			dst.Write(buf[:n])
		}
		if err == nil {
			continue
		}
		// The server's end is not passed on through the silence.
		if fromClient || !r.silenced.Load() {
			r.client.Close()
			r.server.Close()
			b.mu.Lock()
			delete(b.conns, r)
			b.mu.Unlock()
		}
		return
	}
}

// silence makes the open connections, and those accepted until restore, silent.
func (b *blackhole) silence() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.silent = true
	for r := range b.conns {
		r.silenced.Store(true)
	}
}

// restore relays the connections accepted from now on; silent ones stay so.
func (b *blackhole) restore() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.silent = false
}

// openSilent is the number of silent connections the client has not closed.
func (b *blackhole) openSilent() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for r := range b.conns {
		if r.silenced.Load() {
			n++
		}
	}
	return n
}

func (b *blackhole) close() {
	b.ln.Close()
	b.mu.Lock()
	for r := range b.conns {
		r.client.Close()
		r.server.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// The proxy speaks HTTP/1.1 to the client: the premise of the tests below.
func TestBlackhole_ProxiedConnection_IsHTTP1(t *testing.T) {
	_, cfg := newBlackhole(t, testConfig(t))
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", cfg.Host+"/version", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 || resp.StatusCode != http.StatusOK {
		t.Fatalf("through the proxy: %s %s, want HTTP/1.1 200", resp.Proto, resp.Status)
	}
}

// A watch over HTTP/1.1 whose connection goes silent is ended by the client
// a little past its timeoutSeconds (shortened here), and once the path is
// back the informer lists and watches again: every change made meanwhile
// reaches the cache.
func TestInformer_SilentHTTP1Connection_WatchEndsAndCacheRecovers(t *testing.T) {
	checkNoCacheLeaks(t)
	direct := testConfig(t)
	ns := testNamespace(t, direct)
	hole, cfg := newBlackhole(t, direct)
	cfg.Timeout = 2 * time.Second // the lists while silent
	conn := mustConn(t, cfg)
	logs, logger := newCacheLogs()
	c, inf := configMapInformer(t, conn, ns, logger)
	inf.watchFor = 2 * time.Second // before the informer runs
	startCache(t, c)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	hole.silence()
	cms := NewClient[corev1.ConfigMap](mustConn(t, direct))
	const n = 5
	for i := range n {
		if err := cms.Create(t.Context(), newCM(ns, fmt.Sprint("cm-", i), "0")); err != nil {
			t.Fatal(err)
		}
	}
	logs.linesEventually(t, "still silent", 1)
	hole.restore()
	eventually(t, "the changes made while silent in the cache", func() bool {
		return len(mustList(t, inf, ListOptions{})) == n
	})
	eventually(t, "the silent connections closed", func() bool { return hole.openSilent() == 0 })
}

// A write into a silent HTTP/1.1 connection fails after the Conn's timeout
// (rest.Config.Timeout) instead of holding its caller.
func TestClient_WriteIntoSilentHTTP1Connection_FailsAfterTheTimeout(t *testing.T) {
	direct := testConfig(t)
	ns := testNamespace(t, direct)
	hole, cfg := newBlackhole(t, direct)
	const timeout = 2 * time.Second
	cfg.Timeout = timeout
	cms := NewClient[corev1.ConfigMap](mustConn(t, cfg))
	if err := cms.Create(t.Context(), newCM(ns, "before", "0")); err != nil {
		t.Fatal(err) // the connection is open, and kept alive
	}
	hole.silence()
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := cms.Create(ctx, newCM(ns, "into-the-silence", "0"))
	took := time.Since(start)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("create into a silent connection: err %v after %v, want the Conn's timeout (%v)", err, took, timeout)
	}
	if !strings.Contains(err.Error(), "kctl: POST") || !isTimeout(err) {
		t.Errorf("err = %v, want a timeout naming the request", err)
	}
	if took < timeout || took > timeout+5*time.Second {
		t.Errorf("the create failed after %v, want a little over %v", took, timeout)
	}
	hole.restore()
	if err := cms.Create(t.Context(), newCM(ns, "after", "0")); err != nil {
		t.Errorf("create after the path came back: %v", err)
	}
}

// isTimeout reports whether err is a client timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// Issue 23, item 8: a kubeconfig context is picked with Options.Context; a
// $KUBECONFIG naming a missing file says so; insecure-skip-tls-verify is
// warned about once, naming the cluster. Against the real control plane.

// testKubeconfig writes a kubeconfig to a new file and returns its path.
// Its context "real" is the control plane's admin; edit changes it before
// it is written.
func testKubeconfig(t *testing.T, edit func(k *clientcmdapi.Config)) string {
	t.Helper()
	k, err := clientcmd.LoadFromFile(controlplane.Require(t).Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	cur := k.Contexts[k.CurrentContext]
	k.Contexts = map[string]*clientcmdapi.Context{"real": cur}
	k.CurrentContext = "real"
	edit(k)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*k, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// getDefaultNamespace asks mgr's server for Namespace default.
func getDefaultNamespace(t *testing.T, mgr *Manager) error {
	t.Helper()
	_, err := NewClient[corev1.Namespace](mgr.conn).Get(t.Context(), "", "default")
	return err
}

// newLoggedManager makes a Manager from opts whose log goes to the
// returned buffer.
func newLoggedManager(t *testing.T, opts Options) (*Manager, *logBuffer, error) {
	t.Helper()
	logs := &logBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	mgr, err := NewManager(opts)
	return mgr, logs, err
}

func TestOptionsContext_PicksAContextOfTheKubeconfig(t *testing.T) {
	path := testKubeconfig(t, func(k *clientcmdapi.Config) {
		real := k.Contexts["real"]
		k.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
		k.Contexts["broken"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: real.AuthInfo}
		k.CurrentContext = "broken"
	})

	mgr, _, err := newLoggedManager(t, Options{Kubeconfig: path, Context: "real"})
	if err != nil {
		t.Fatal(err)
	}
	if err := getDefaultNamespace(t, mgr); err != nil {
		t.Errorf("Context real: %v, want the control plane to answer", err)
	}

	mgr, _, err = newLoggedManager(t, Options{Kubeconfig: path})
	if err != nil {
		t.Fatal(err)
	}
	if host := mgr.Config().Host; host != "https://127.0.0.1:1" {
		t.Errorf("no Context: host %q, want the current-context's https://127.0.0.1:1", host)
	}

	_, _, err = newLoggedManager(t, Options{Kubeconfig: path, Context: "missing"})
	want := `kctl: the kubeconfig ` + path + ` has no context "missing": pick one of ["broken" "real"]`
	if err == nil || err.Error() != want {
		t.Errorf("Context missing: error %v\nwant %s", err, want)
	}
}

func TestKubeconfigEnv_MissingFile_ErrorNamesTheVariableAndTheFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	t.Setenv("KUBECONFIG", missing)
	_, _, err := newLoggedManager(t, Options{})
	if err == nil {
		t.Fatal("NewManager succeeded with $KUBECONFIG naming a missing file")
	}
	for _, want := range []string{"kctl: $KUBECONFIG names " + missing, "no such file exists", "correct $KUBECONFIG"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	sep := string(filepath.ListSeparator)
	t.Setenv("KUBECONFIG", sep+sep)
	_, _, err = newLoggedManager(t, Options{})
	if want := `kctl: $KUBECONFIG ("` + sep + sep + `") names no file: correct or unset it`; err == nil || err.Error() != want {
		t.Errorf("$KUBECONFIG of separators only: error %v, want %s", err, want)
	}
}

func TestOptionsKubeconfig_MissingFile_ErrorNamesIt(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	_, _, err := newLoggedManager(t, Options{Kubeconfig: missing})
	want := "kctl: the kubeconfig " + missing + " (Options.Kubeconfig, a --kubeconfig flag) does not exist: correct the path"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %v\nwant one starting %s", err, want)
	}
}

func TestKubeconfigEnv_OneMissingAmongOthers_IsSkippedWithAWarning(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	path := testKubeconfig(t, func(*clientcmdapi.Config) {})
	t.Setenv("KUBECONFIG", missing+string(filepath.ListSeparator)+path)
	mgr, logs, err := newLoggedManager(t, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := getDefaultNamespace(t, mgr); err != nil {
		t.Errorf("the file that exists was not used: %v", err)
	}
	if n := len(logs.lines("level=WARN msg=\"kctl: $KUBECONFIG names a file that does not exist; loading the others\" file=" + missing)); n != 1 {
		t.Errorf("%d warnings naming %s, want 1:\n%s", n, missing, logs)
	}
}

func TestKubeconfigInsecure_WarnedOnceNamingTheCluster(t *testing.T) {
	path := testKubeconfig(t, func(k *clientcmdapi.Config) {
		real := k.Contexts["real"]
		server := k.Clusters[real.Cluster].Server
		k.Clusters["lab-insecure"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
		real.Cluster = "lab-insecure"
	})
	mgr, logs, err := newLoggedManager(t, Options{Kubeconfig: path})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := getDefaultNamespace(t, mgr); err != nil {
			t.Fatal(err)
		}
	}
	want := `kctl: cluster \"lab-insecure\" in the kubeconfig ` + path + ` sets insecure-skip-tls-verify`
	if n := len(logs.lines(want)); n != 1 || len(logs.lines("level=WARN")) != 1 {
		t.Errorf("logged:\n%s\nwant one warning containing %s", logs, want)
	}

	secure := testKubeconfig(t, func(*clientcmdapi.Config) {})
	_, logs, err = newLoggedManager(t, Options{Kubeconfig: secure})
	if err != nil {
		t.Fatal(err)
	}
	if s := logs.String(); s != "" {
		t.Errorf("a kubeconfig with a CA logged:\n%s", s)
	}
}

// countedConn returns a Conn to host whose requests are counted in the
// returned metrics, as a Manager's Conn is.
func countedConn(t *testing.T, host string) (*Conn, *metrics.Registry) {
	t.Helper()
	conn, err := NewConn(&rest.Config{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	conn.requests = m.Requests
	return conn, m
}

// requestSeries returns the rest_client_* lines of m's page.
func requestSeries(t *testing.T, m *metrics.Registry) map[string]string {
	t.Helper()
	return samples(onlyFamilies(scrapeMetrics(t, m.Handler()), "rest_client_"))
}

// TestConn_Retried429_CountsEachAttempt_TimesTheRequestUntilClose uses a
// fault-injecting server (httptest) that answers the first attempt 429.
func TestConn_Retried429_CountsEachAttempt_TimesTheRequestUntilClose(t *testing.T) {
	var calls atomic.Int32
	faulty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "{}")
	}))
	defer faulty.Close()
	conn, m := countedConn(t, faulty.URL)
	host := strings.TrimPrefix(faulty.URL, "http://")

	resp, err := conn.do(t.Context(), request{method: http.MethodGet, path: "/api/v1/configmaps"})
	if err != nil {
		t.Fatal(err)
	}
	page := requestSeries(t, m)
	for series, want := range map[string]string{
		`rest_client_requests_total{code="429",host="` + host + `",method="GET"}`: "1",
		`rest_client_requests_total{code="200",host="` + host + `",method="GET"}`: "1",
	} {
		if page[series] != want {
			t.Errorf("%s = %q, want %s; page: %v", series, page[series], want, page)
		}
	}
	duration := `rest_client_request_duration_seconds_count{host="` + host + `",verb="GET"}`
	if _, ok := page[duration]; ok {
		t.Errorf("%s is on the page before the answer's body is closed", duration)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp.Body.Close() // a second Close times nothing more
	page = requestSeries(t, m)
	if page[duration] != "1" {
		t.Errorf("%s = %q after Close, want 1 (the retried request once)", duration, page[duration])
	}
	if le := `rest_client_request_duration_seconds_bucket{host="` + host + `",verb="GET",le="60"}`; page[le] != "1" {
		t.Errorf("%s = %q, want 1: client-go's buckets end at 60", le, page[le])
	}
}

func TestConn_NoAnswer_CountsErrorCodeAndTimes(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler()) // closed at once: a refused connection
	closed.Close()
	conn, m := countedConn(t, closed.URL)
	host := strings.TrimPrefix(closed.URL, "http://")
	if _, err := conn.do(t.Context(), request{method: http.MethodPost, path: "/api/v1/namespaces/ns/configmaps", body: []byte("{}")}); err == nil {
		t.Fatal("do to a closed server = nil error")
	}
	page := requestSeries(t, m)
	for series, want := range map[string]string{
		`rest_client_requests_total{code="<error>",host="` + host + `",method="POST"}`: "1",
		`rest_client_request_duration_seconds_count{host="` + host + `",verb="POST"}`:  "1",
	} {
		if page[series] != want {
			t.Errorf("%s = %q, want %s; page: %v", series, page[series], want, page)
		}
	}
}

// TestConn_Watch_CountedNotTimed uses a fault-injecting server (httptest)
// whose watches end at once.
func TestConn_Watch_CountedNotTimed(t *testing.T) {
	watch := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})) // an empty 200
	defer watch.Close()
	conn, m := countedConn(t, watch.URL)
	host := strings.TrimPrefix(watch.URL, "http://")
	resp, err := conn.do(t.Context(), request{method: http.MethodGet, path: "/api/v1/pods", query: url.Values{"watch": {"true"}}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	page := requestSeries(t, m)
	if got := page[`rest_client_requests_total{code="200",host="`+host+`",method="GET"}`]; got != "1" {
		t.Errorf("watch requests counted %q, want 1; page: %v", got, page)
	}
	for series := range page {
		if strings.HasPrefix(series, "rest_client_request_duration_seconds") {
			t.Errorf("a watch was timed: %s", series)
		}
	}
}

// Issue 25, item 10: the API server's warnings (the Warning header) are
// logged once per distinct text through Options.Logger. The real server
// sends them for a CRD version marked deprecated and for a field its schema
// lacks (dropped from a write, fieldValidation Warn being the default).

// warnWidget is served at v1beta1, deprecated, by warnWidgetCRD, whose
// schema has spec.size but not spec.color.
type warnWidget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              warnWidgetSpec `json:"spec"`
}

type warnWidgetSpec struct {
	Size  int    `json:"size,omitempty"`
	Color string `json:"color,omitempty"`
}

var _ = Declare[warnWidget](Resource{Group: "warnings.kctl.test", Version: "v1beta1", Kind: "WarnWidget", Plural: "warnwidgets", Namespaced: true})

const warnWidgetDeprecation = "warnings.kctl.test/v1beta1 WarnWidget is deprecated; use v1"

const warnWidgetCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"warnwidgets.warnings.kctl.test"},
 "spec":{"group":"warnings.kctl.test","scope":"Namespaced",
  "names":{"plural":"warnwidgets","singular":"warnwidget","kind":"WarnWidget","listKind":"WarnWidgetList"},
  "versions":[{"name":"v1beta1","served":true,"storage":true,
   "deprecated":true,"deprecationWarning":"` + warnWidgetDeprecation + `",
   "schema":{"openAPIV3Schema":{"type":"object","properties":{
    "spec":{"type":"object","properties":{"size":{"type":"integer"}}}}}}}]}}`

func TestConn_ServerWarnings_LoggedOncePerText(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	defer testCRDAbsent(t, cfg, ns, "warnings.kctl.test", "v1beta1", "warnwidgets")()
	if code, body := testRawRequest(t, cfg, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", warnWidgetCRD); code != http.StatusCreated {
		t.Fatalf("creating the CRD: %d %s", code, body)
	}
	// Served as kctl sees it: the REST path and the discovery document
	// (which kctl reads on a 404) catch up at different times. Through a
	// Conn of its own, so that the Manager's logs hold only what follows.
	probe := NewClient[warnWidget](mustConn(t, cfg))
	eventually(t, "warnwidgets served", func() bool {
		_, err := probe.List(t.Context(), ListOptions{Namespace: ns})
		if err != nil && !errors.Is(err, ErrNotInstalled) {
			t.Fatalf("listing warnwidgets: %v", err)
		}
		return err == nil
	})

	mgr, logs, err := newLoggedManager(t, Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	widgets := NewClient[warnWidget](mgr.conn)
	for _, name := range []string{"a", "b"} {
		w := &warnWidget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: warnWidgetSpec{Size: 1, Color: "red"}}
		if err := widgets.Create(t.Context(), w); err != nil {
			t.Fatalf("Create %s: %v", name, err)
		}
	}
	for range 3 {
		if _, err := widgets.Get(t.Context(), ns, "a"); err != nil {
			t.Fatal(err)
		}
	}

	deprecated := logs.lines(`level=WARN msg="the API server warns" warning="` + warnWidgetDeprecation + `" request="POST /apis/warnings.kctl.test/v1beta1/namespaces/` + ns + `/warnwidgets"`)
	unknown := logs.lines(`level=WARN msg="the API server warns" warning="unknown field \"spec.color\""`)
	if len(deprecated) != 1 || len(unknown) != 1 || len(logs.lines("msg=")) != 2 {
		t.Errorf("logged:\n%s\nwant one line for the deprecation (with the first request) and one for spec.color", logs)
	}

	// A Conn made with NewConn logs to slog.Default(). SetDefault also
	// sends package log's output to it: put that back too.
	defaults := &logBuffer{}
	prev := slog.Default()
	prevOut := log.Writer()
	prevFlags := log.Flags()
	slog.SetDefault(slog.New(slog.NewTextHandler(defaults, nil)))
	conn, err := NewConn(cfg)
	slog.SetDefault(prev)
	log.SetOutput(prevOut)
	log.SetFlags(prevFlags)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := NewClient[warnWidget](conn).Get(t.Context(), ns, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(defaults.lines(`warning="` + warnWidgetDeprecation + `" request="GET /apis/warnings.kctl.test/v1beta1/namespaces/` + ns + `/warnwidgets/a"`)); n != 1 {
		t.Errorf("NewConn's Conn logged to slog.Default():\n%s\nwant the deprecation once", defaults)
	}
}
