package kctl

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

// requestLog records the query of every GET of ConfigMaps a config sends.
type requestLog struct {
	mu      sync.Mutex
	queries []url.Values
}

func (l *requestLog) wrap(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return partitionRoundTrip(func(r *http.Request) (*http.Response, error) {
			if r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/configmaps") {
				l.mu.Lock()
				l.queries = append(l.queries, r.URL.Query())
				l.mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	})
}

// count is the number of requests recorded for which match holds.
func (l *requestLog) count(match func(q url.Values) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, q := range l.queries {
		if match(q) {
			n++
		}
	}
	return n
}

func isPagedList(q url.Values) bool  { return q.Get("watch") == "" }
func isWatchList(q url.Values) bool  { return q.Get("sendInitialEvents") == "true" }
func isPlainWatch(q url.Values) bool { return q.Get("watch") == "true" && !isWatchList(q) }

// fillConfigMaps creates ConfigMaps cm-<from> to cm-<to - 1> in ns,
// straight on the server.
func fillConfigMaps(t *testing.T, cfg *rest.Config, ns string, from, to int) {
	t.Helper()
	cms := NewClient[corev1.ConfigMap](mustConn(t, cfg))
	for i := from; i < to; i++ {
		if err := cms.Create(t.Context(), newCM(ns, fmt.Sprint("cm-", i), "0")); err != nil {
			t.Fatal(err)
		}
	}
}

// The first sync is the watch-list stream: one request gives every object
// as an Initial Added event, synced at the bookmark that ends them, and
// then the changes; no list is sent.
func TestInformer_WatchList_SyncsFromOneStreamAndFollowsIt(t *testing.T) {
	checkNoCacheLeaks(t)
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	const n = 30
	fillConfigMaps(t, cfg, ns, 0, n)
	var log requestLog
	log.wrap(cfg)
	start := time.Now()
	inf, rec, logs := cmInformer(t, cfg, ns)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Logf("synced in %v", time.Since(start))
	if got := len(mustList(t, inf, ListOptions{})); got != n {
		t.Fatalf("synced with %d ConfigMaps, want %d", got, n)
	}
	eventually(t, "the initial events", func() bool { return len(rec.all()) == n })
	for _, e := range rec.all() {
		if e.Type != Added || !e.Initial {
			t.Errorf("event %s, want an Initial Added", describeEvent(e))
		}
	}
	fillConfigMaps(t, cfg, ns, n, n+1)
	eventually(t, "the object created after the sync", func() bool {
		_, ok := inf.Get(ns, fmt.Sprint("cm-", n))
		return ok
	})
	lists := log.count(isPagedList)
	streams := log.count(isWatchList)
	watches := log.count(isPlainWatch)
	if lists != 0 || streams != 1 || watches != 0 {
		t.Errorf("requests: %d lists, %d watch-list streams, %d watches; want 0, 1, 0", lists, streams, watches)
	}
	if lines := logs.lines("refused the watch-list"); len(lines) != 0 {
		t.Errorf("the real server's stream was taken for refused: %q", lines)
	}
}

// watchListRefusingProxy is a fault-injecting proxy in front of the real
// server: it asks the server for each watch-list stream with
// resourceVersionMatch=Exact, which the server refuses as it refuses the
// stream when its WatchList feature is off: 422, "sendInitialEvents ...
// Forbidden". Everything else passes unchanged. It returns a config for it.
func watchListRefusingProxy(t *testing.T, cfg *rest.Config) *rest.Config {
	t.Helper()
	upstream, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			q := pr.Out.URL.Query()
			if isWatchList(q) {
				q.Set("resourceVersionMatch", "Exact")
				pr.Out.URL.RawQuery = q.Encode()
			}
		},
		Transport:     rt,
		FlushInterval: -1,
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL, QPS: cfg.QPS, Burst: cfg.Burst}
}

// Where the server refuses the stream, the informer lists in pages and
// watches, as before the stream, saying so in one log line for all its
// namespaces; it does not ask for the stream again.
func TestInformer_WatchListRefused_ListsInPagesWithOneLogLine(t *testing.T) {
	checkNoCacheLeaks(t)
	direct := testConfig(t)
	a, b := testNamespace(t, direct), testNamespace(t, direct)
	const n = 20
	fillConfigMaps(t, direct, a, 0, n)
	fillConfigMaps(t, direct, b, 0, n)
	cfg := watchListRefusingProxy(t, direct)
	var log requestLog
	log.wrap(cfg)
	logs, logger := newCacheLogs()
	c := NewCache(mustConn(t, cfg), CacheOptions{Logger: logger})
	if err := ScopeFor[corev1.ConfigMap](c, Scope{Namespaces: []string{a, b}}); err != nil {
		t.Fatal(err)
	}
	inf, err := InformerFor[corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	startCache(t, c)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := len(mustList(t, inf, ListOptions{})); got != 2*n {
		t.Fatalf("synced with %d ConfigMaps, want %d", got, 2*n)
	}
	fillConfigMaps(t, direct, a, n, n+1)
	eventually(t, "the object created after the sync", func() bool {
		_, ok := inf.Get(a, fmt.Sprint("cm-", n))
		return ok
	})
	lines := logs.lines("refused the watch-list")
	if len(lines) != 1 || !strings.Contains(lines[0], "sendInitialEvents") {
		t.Errorf("want one log line saying the server refused the stream, naming why; got %q", lines)
	}
	streams := log.count(isWatchList)
	lists := log.count(isPagedList)
	watches := log.count(isPlainWatch)
	if streams < 1 || streams > 2 || lists != 2 || watches != 2 {
		t.Errorf("requests: %d watch-list streams, %d lists, %d watches; want 1 or 2 (before the first refusal), 2, 2",
			streams, lists, watches)
	}
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "configmaps/v1") }) {
		t.Errorf("the log line does not name the resource: %q", lines)
	}
}

// A server that ignores sendInitialEvents (older than Kubernetes 1.27; a
// fake here, as the real one knows it) answers the stream as a plain watch:
// objects as ADDED events, never the bookmark that ends them, until its
// timeout. The informer takes that for a refusal, lists in pages and
// watches; the same server's failure mid-stream would only be retried.
func TestInformerFault_ServerIgnoresSendInitialEvents_ListsInPages(t *testing.T) {
	checkNoCacheLeaks(t)
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fakeDiscovery(w, r) {
			return
		}
		c := fakeCall{w: w, r: r}
		q := r.URL.Query()
		mu.Lock()
		got = append(got, fmt.Sprintf("watch=%s sendInitialEvents=%s", q.Get("watch"), q.Get("sendInitialEvents")))
		mu.Unlock()
		switch {
		case q.Get("watch") != "true":
			c.list("5", "", cacheWidgetAt("a", "4", 0))
		case isWatchList(q):
			w.Header().Set("Content-Type", "application/json")
			c.send("ADDED", cacheWidgetAt("a", "4", 0))
			// ends at the timeout it was given, with no bookmark
			seconds, _ := strconv.Atoi(q.Get("timeoutSeconds"))
			select {
			case <-time.After(time.Duration(seconds) * time.Second):
			case <-r.Context().Done():
			}
		default:
			w.Header().Set("Content-Type", "application/json")
			c.hang()
		}
	}))
	t.Cleanup(srv.Close)
	logs, logger := newCacheLogs()
	c := NewCache(mustConn(t, &rest.Config{Host: srv.URL}), CacheOptions{Logger: logger})
	inf, err := InformerFor[cacheWidget](c)
	if err != nil {
		t.Fatal(err)
	}
	inf.watchFor = time.Second // the timeout the fake keeps to
	startCache(t, c)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, ok := inf.Get("default", "a"); !ok {
		t.Error("widget a is not in the cache")
	}
	lines := logs.linesEventually(t, "refused the watch-list", 1)
	if !strings.Contains(lines[0], "ignores sendInitialEvents") {
		t.Errorf("log line %q does not say why", lines[0])
	}
	eventually(t, "the watch after the list", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 3
	})
	mu.Lock()
	defer mu.Unlock()
	want := []string{"watch=true sendInitialEvents=true", "watch= sendInitialEvents=", "watch=true sendInitialEvents="}
	if !slices.Equal(got[:3], want) {
		t.Errorf("requests %q, want %q", got, want)
	}
}
