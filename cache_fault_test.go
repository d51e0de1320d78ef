package kctl

// Fault injection for the informer with httptest: a fake API server for one
// declared JSON type whose every list and watch answer a test scripts. JSON
// keeps the frames readable; the informer does not care about the encoding.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
)

// cacheWidget is the fake server's type.
type cacheWidget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Size int `json:"size"`
	} `json:"spec"`
}

var _ = Declare[cacheWidget](Resource{Group: "cachetest.kctl.dev", Version: "v1", Kind: "Widget", Plural: "widgets", Namespaced: true})

func cacheWidgetAt(name, rv string, size int) cacheWidget {
	w := cacheWidget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, ResourceVersion: rv}}
	w.APIVersion, w.Kind, w.Spec.Size = "cachetest.kctl.dev/v1", "Widget", size
	return w
}

// fakeCall is one request to the fake API server: the n-th (from 1) list or watch.
type fakeCall struct {
	kind string // "list" or "watch"
	n    int
	w    http.ResponseWriter
	r    *http.Request
}

func (c fakeCall) param(name string) string { return c.r.URL.Query().Get(name) }

// list answers with items and the list's resourceVersion and continue token.
func (c fakeCall) list(rv, next string, items ...cacheWidget) {
	body, _ := json.Marshal(map[string]any{"apiVersion": "cachetest.kctl.dev/v1", "kind": "WidgetList",
		"metadata": map[string]any{"resourceVersion": rv, "continue": next}, "items": items})
	c.w.Header().Set("Content-Type", "application/json")
	c.w.Write(body)
}

// status answers with a failure Status.
func (c fakeCall) status(code int, reason metav1.StatusReason, msg string) {
	c.w.Header().Set("Content-Type", "application/json")
	c.w.WriteHeader(code)
	c.w.Write(fakeStatusJSON(code, reason, msg))
}

func fakeStatusJSON(code int, reason metav1.StatusReason, msg string) []byte {
	b, _ := json.Marshal(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: "Failure", Code: int32(code), Reason: reason, Message: msg, Details: &metav1.StatusDetails{}})
	return b
}

// send writes one watch event (object is marshaled unless it is raw JSON) and flushes it.
func (c fakeCall) send(typ string, object any) {
	raw, ok := object.(json.RawMessage)
	if !ok {
		raw, _ = json.Marshal(object)
	}
	fmt.Fprintf(c.w, "{\"type\":%q,\"object\":%s}\n", typ, raw)
	c.w.(http.Flusher).Flush()
}

// hang keeps the watch open until the client goes away.
func (c fakeCall) hang() { c.w.(http.Flusher).Flush(); <-c.r.Context().Done() }

// fakeAPI serves lists and watches of cacheWidget, scripted by handle.
type fakeAPI struct {
	url   string
	mu    sync.Mutex
	calls map[string]int
	seen  []string // "list rv=... continue=..." or "watch rv=...", in order
}

func newFakeAPI(t *testing.T, handle func(c fakeCall)) *fakeAPI {
	t.Helper()
	f := &fakeAPI{calls: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fakeDiscovery(w, r) {
			return
		}
		kind := "list"
		if r.URL.Query().Get("watch") == "true" {
			kind = "watch"
			w.Header().Set("Content-Type", "application/json")
		}
		f.mu.Lock()
		f.calls[kind]++
		n := f.calls[kind]
		f.seen = append(f.seen, fmt.Sprintf("%s %s rv=%s continue=%s", kind, r.URL.Path,
			r.URL.Query().Get("resourceVersion"), r.URL.Query().Get("continue")))
		f.mu.Unlock()
		handle(fakeCall{kind: kind, n: n, w: w, r: r})
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func (f *fakeAPI) count(kind string) int { f.mu.Lock(); defer f.mu.Unlock(); return f.calls[kind] }
func (f *fakeAPI) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

// cacheLogs collects a logger's lines.
type cacheLogs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *cacheLogs) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}
func (b *cacheLogs) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.buf.String() }
func (b *cacheLogs) lines(substr string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

func newCacheLogs() (*cacheLogs, *slog.Logger) {
	b := &cacheLogs{}
	return b, slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// eventRecorder collects a handler's events.
type eventRecorder[T any] struct {
	mu     sync.Mutex
	events []Event[T]
}

func (r *eventRecorder[T]) handle(e Event[T]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}
func (r *eventRecorder[T]) all() []Event[T] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event[T](nil), r.events...)
}

// describeEvent is "Added a@1 initial" style, for comparing events.
func describeEvent[T any](e Event[T]) string {
	m := metaOf(e.Object)
	s := fmt.Sprintf("%v %s@%s", e.Type, m.GetName(), m.GetResourceVersion())
	if e.Initial {
		s += " initial"
	}
	if e.Relisted {
		s += " relisted"
	}
	if e.Resync {
		s += " resync"
	}
	return s
}

func describeEvents[T any](events []Event[T]) []string {
	var out []string
	for _, e := range events {
		out = append(out, describeEvent(e))
	}
	return out
}

// cacheEventually polls cond until it holds, failing after a deadline.
func cacheEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// cacheTestCtx is the test's context, ended after 30s so that no wait hangs.
func cacheTestCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// checkNoCacheLeaks fails the test if any informer or cache goroutine outlives it.
// Register it first, so that it runs after every other cleanup.
func checkNoCacheLeaks(t *testing.T) {
	t.Cleanup(func() {
		var stacks string
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			buf := make([]byte, 1<<20)
			stacks = string(buf[:runtime.Stack(buf, true)])
			if !strings.Contains(stacks, "kctl.(*Informer[") && !strings.Contains(stacks, "kctl.(*handler[") &&
				!strings.Contains(stacks, "kctl.(*Cache)") && !strings.Contains(stacks, "kctl.(*watchStream[") {
				return
			}
			runtime.Gosched()
		}
		t.Errorf("goroutines leaked after the cache stopped:\n%s", stacks)
	})
}

// startCache runs c until the test ends, then checks that it stopped.
func startCache(t *testing.T, c *Cache) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Cache.Start = %v", err)
		}
	})
}

// fakeInformer makes a cache on f and returns its informer of widgets with a
// recording handler, started.
func fakeInformer(t *testing.T, f *fakeAPI, opts CacheOptions) (*Informer[cacheWidget], *eventRecorder[cacheWidget], *cacheLogs) {
	t.Helper()
	conn, err := NewConn(&rest.Config{Host: f.url})
	if err != nil {
		t.Fatal(err)
	}
	logs, logger := newCacheLogs()
	opts.Logger = logger
	c := NewCache(conn, opts)
	inf, err := InformerFor[cacheWidget](c)
	if err != nil {
		t.Fatal(err)
	}
	rec := &eventRecorder[cacheWidget]{}
	inf.AddHandler(rec.handle)
	startCache(t, c)
	return inf, rec, logs
}

func wantEvents[T any](t *testing.T, rec *eventRecorder[T], want ...string) {
	t.Helper()
	cacheEventually(t, fmt.Sprintf("events %q", want), func() bool { return len(rec.all()) >= len(want) })
	if got := describeEvents(rec.all()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
}

func TestInformerFault_WatchCutMidFrame_ResumesFromLastResourceVersion(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		switch {
		case c.kind == "list":
			c.list("10", "", cacheWidgetAt("a", "9", 1))
		case c.n == 1:
			if s, _ := strconv.Atoi(c.param("timeoutSeconds")); s < 300 || s > 600 {
				t.Errorf("watch timeoutSeconds = %q, want 300 to 600", c.param("timeoutSeconds"))
			}
			if c.param("allowWatchBookmarks") != "true" {
				t.Errorf("watch without allowWatchBookmarks=true")
			}
			c.send("ADDED", cacheWidgetAt("b", "11", 1))
			fmt.Fprint(c.w, `{"type":"MODIFIED","object":{"metadata":{"name":"b","namesp`)
			c.w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // cut the connection mid-frame
		default:
			c.send("MODIFIED", cacheWidgetAt("b", "12", 2))
			c.hang()
		}
	})
	inf, rec, logs := fakeInformer(t, f, CacheOptions{})
	wantEvents(t, rec, "Added a@9 initial", "Added b@11", "Updated b@12")
	if got := f.requests(); len(got) != 3 || !strings.Contains(got[1], "rv=10") || !strings.Contains(got[2], "rv=11") {
		t.Errorf("requests = %q, want a list, a watch from 10 and a watch from 11", got)
	}
	if len(logs.lines("watch failed")) != 1 {
		t.Errorf("want one log line for the cut watch, got:\n%s", logs)
	}
	if err := inf.Err(); err != nil {
		t.Errorf("Err() = %v after the watch resumed", err)
	}
}

func TestInformerFault_GarbageEvents_AreLoggedAndSkipped(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		switch {
		case c.kind == "list":
			c.list("10", "")
		case c.n == 1:
			c.send("ADDED", json.RawMessage(`{"metadata":{"name":"bad","namespace":"default"},"spec":{"size":"huge"}}`))
			c.send("EXPLODED", cacheWidgetAt("x", "11", 1))
			c.send("ADDED", json.RawMessage(`null`))
			c.send("ADDED", cacheWidgetAt("good", "12", 1))
			c.hang()
		default:
			c.hang()
		}
	})
	inf, rec, logs := fakeInformer(t, f, CacheOptions{})
	wantEvents(t, rec, "Added good@12")
	if _, ok := inf.Get("default", "bad"); ok {
		t.Errorf("the undecodable object was stored")
	}
	if l := logs.lines("could not decode"); len(l) == 0 || !strings.Contains(strings.Join(l, ""), "bad") {
		t.Errorf("want a log line naming the undecodable object \"bad\", got:\n%s", logs)
	}
	if f.count("watch") != 1 {
		t.Errorf("%d watches, want 1: garbage must not end the stream", f.count("watch"))
	}
}

func TestInformerFault_ErrorEvent410_RelistsAndReportsOnlyDifferences(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		switch {
		case c.kind == "list" && c.n == 1:
			c.list("3", "", cacheWidgetAt("a", "1", 1), cacheWidgetAt("b", "2", 1), cacheWidgetAt("c", "3", 1))
		case c.kind == "list":
			c.list("9", "", cacheWidgetAt("a", "1", 1), cacheWidgetAt("b", "5", 2), cacheWidgetAt("d", "6", 1))
		case c.n == 1:
			c.send("ERROR", json.RawMessage(fakeStatusJSON(410, metav1.StatusReasonExpired, "too old resource version: 3 (8)")))
			c.hang()
		default:
			c.hang()
		}
	})
	inf, rec, _ := fakeInformer(t, f, CacheOptions{})
	cacheEventually(t, "the first list", inf.HasSynced)
	a, _ := inf.Get("default", "a")
	c, _ := inf.Get("default", "c")
	wantEvents(t, rec, "Added a@1 initial", "Added b@2 initial", "Added c@3 initial",
		"Updated b@5 relisted", "Added d@6 relisted", "Deleted c@3 relisted")
	events := rec.all()
	if events[3].Old == nil || metaOf(events[3].Old).GetResourceVersion() != "2" {
		t.Errorf("the relisted update's Old is not b@2")
	}
	if events[5].Object != c {
		t.Errorf("the relisted delete does not carry the last stored c")
	}
	if a2, _ := inf.Get("default", "a"); a2 != a {
		t.Errorf("the unchanged object a was replaced by the relist")
	}
	if got := f.count("list"); got != 2 {
		t.Errorf("%d lists, want 2", got)
	}
}

func TestInformerFault_WatchAlwaysGone_BacksOffInsteadOfRelistingInALoop(t *testing.T) {
	checkNoCacheLeaks(t)
	start := time.Now()
	f := newFakeAPI(t, func(c fakeCall) {
		if c.kind == "list" {
			c.list("5", "", cacheWidgetAt("a", "1", 1))
			return
		}
		c.status(410, metav1.StatusReasonExpired, "too old resource version: 5 (9)")
	})
	fakeInformer(t, f, CacheOptions{})
	cacheEventually(t, "four lists", func() bool { return f.count("list") >= 4 })
	// Three 410s in a row after fresh lists wait at least half of 200ms, 400ms and 800ms.
	if d := time.Since(start); d < 700*time.Millisecond {
		t.Errorf("four lists within %v: the informer relists in a loop", d)
	}
}

func TestInformerFault_ExpiredContinueToken_ListsAgainWithoutDuplicates(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		switch {
		case c.kind == "list" && c.param("limit") != "500":
			t.Errorf("list limit = %q, want 500", c.param("limit"))
		case c.kind == "list" && c.param("continue") == "":
			c.list("5", fmt.Sprint("page2-", c.n), cacheWidgetAt("a", "1", 1), cacheWidgetAt("b", "2", 1))
		case c.kind == "list" && c.param("continue") == "page2-1":
			c.status(410, metav1.StatusReasonExpired, "The provided continue parameter is too old")
		case c.kind == "list":
			c.list("7", "", cacheWidgetAt("c", "3", 1))
		default:
			c.hang()
		}
	})
	inf, rec, _ := fakeInformer(t, f, CacheOptions{})
	wantEvents(t, rec, "Added a@1 initial", "Added b@2 initial", "Added c@3 initial")
	if n, _ := inf.Stats(); n != 3 || !inf.HasSynced() {
		t.Errorf("Stats() = %d objects, HasSynced() = %v; want 3, true", n, inf.HasSynced())
	}
}

func TestInformerFault_ServerErrors_BackOffAndReport(t *testing.T) {
	checkNoCacheLeaks(t)
	start := time.Now()
	f := newFakeAPI(t, func(c fakeCall) {
		switch {
		case c.kind == "list" && c.n <= 2:
			c.status(503, metav1.StatusReasonServiceUnavailable, "etcd is down")
		case c.kind == "list" && c.n == 3:
			c.status(403, metav1.StatusReasonForbidden, `widgets.cachetest.kctl.dev is forbidden: User "x" cannot list`)
		case c.kind == "list":
			c.list("5", "", cacheWidgetAt("a", "1", 1))
		default:
			c.hang()
		}
	})
	inf, _, logs := fakeInformer(t, f, CacheOptions{})
	cacheEventually(t, "a Forbidden error", func() bool { return apierrors.IsForbidden(inf.Err()) })
	cacheEventually(t, "the sync", inf.HasSynced)
	if err := inf.Err(); err != nil {
		t.Errorf("Err() = %v after a successful list", err)
	}
	// Three failures wait at least half of 200ms, 400ms and 800ms.
	if d := time.Since(start); d < 700*time.Millisecond {
		t.Errorf("synced %v after three failures: no backoff", d)
	}
	lines := logs.lines("list failed, retrying")
	if len(lines) != 3 || !strings.Contains(lines[0], "retryIn=") || !strings.Contains(lines[2], "forbidden") {
		t.Errorf("want three log lines saying what failed and when it retries, got:\n%s", logs)
	}
}

func TestInformerFault_NotInstalled_WaitsStartsAndWaitsAgain(t *testing.T) {
	checkNoCacheLeaks(t)
	var mu sync.Mutex
	var crd chan struct{} // closed when the CRD is deleted; nil while it is not installed
	setInstalled := func(v bool) {
		mu.Lock()
		defer mu.Unlock()
		if v {
			crd = make(chan struct{})
		} else {
			close(crd)
			crd = nil
		}
	}
	f := newFakeAPI(t, func(c fakeCall) {
		mu.Lock()
		deleted := crd
		mu.Unlock()
		switch {
		case deleted == nil:
			c.status(404, metav1.StatusReasonNotFound, "the server could not find the requested resource")
		case c.kind == "list":
			c.list("5", "", cacheWidgetAt("a", "4", 1))
		default:
			c.w.(http.Flusher).Flush()
			select {
			case <-deleted: // the server ends the watch
			case <-c.r.Context().Done():
			}
		}
	})
	inf, rec, logs := fakeInformer(t, f, CacheOptions{})
	cacheEventually(t, "not installed", func() bool { return errors.Is(inf.Err(), ErrNotInstalled) })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err := inf.WaitForSync(ctx)
	cancel()
	if !errors.Is(err, ErrNotInstalled) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "widgets") {
		t.Errorf("WaitForSync() = %v, want an error naming widgets, matching ErrNotInstalled and the deadline", err)
	}
	setInstalled(true)
	wantEvents(t, rec, "Added a@4 initial")
	cacheEventually(t, "healthy", func() bool { return inf.Err() == nil })
	setInstalled(false)
	cacheEventually(t, "not installed again", func() bool { return errors.Is(inf.Err(), ErrNotInstalled) })
	if n := len(logs.lines("level=WARN")); n > 4 {
		t.Errorf("%d warnings for a missing CRD; want the first of each outage only:\n%s", n, logs)
	}
}

func TestInformerFault_SlowHandler_DoesNotStallTheWatchOrOtherHandlers(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		switch {
		case c.kind == "list":
			c.list("1", "")
		case c.n == 1:
			for i := range 100 {
				c.send("ADDED", cacheWidgetAt(fmt.Sprint("w", i), fmt.Sprint(i+2), 1))
			}
			c.hang()
		default:
			c.hang()
		}
	})
	conn, _ := NewConn(&rest.Config{Host: f.url})
	c := NewCache(conn, CacheOptions{})
	inf, _ := InformerFor[cacheWidget](c)
	release := make(chan struct{})
	slow, fast := &eventRecorder[cacheWidget]{}, &eventRecorder[cacheWidget]{}
	inf.AddHandler(func(e Event[cacheWidget]) { <-release; slow.handle(e) })
	inf.AddHandler(fast.handle)
	startCache(t, c)
	cacheEventually(t, "100 objects stored and delivered to the fast handler", func() bool {
		n, _ := inf.Stats()
		return n == 100 && len(fast.all()) == 100
	})
	close(release)
	cacheEventually(t, "the slow handler to catch up", func() bool { return len(slow.all()) == 100 })
	for i, e := range slow.all() {
		if want := fmt.Sprint("w", i); e.Object.Name != want {
			t.Fatalf("slow handler event %d is %s, want %s: out of order", i, e.Object.Name, want)
		}
	}
}

func TestInformerFault_StoreReads_ReturnTheSharedObjects(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		if c.kind == "list" {
			a, b := cacheWidgetAt("a", "1", 1), cacheWidgetAt("b", "2", 2)
			a.Labels, b.Labels = map[string]string{"tier": "web"}, map[string]string{"tier": "db"}
			a.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
			c.list("2", "", a, b)
			return
		}
		c.hang()
	})
	inf, rec, _ := fakeInformer(t, f, CacheOptions{})
	if err := inf.AddIndex("size", func(w *cacheWidget) []string { return []string{fmt.Sprint(w.Spec.Size)} }); err != nil {
		t.Fatal(err)
	}
	if err := inf.AddIndex("size", func(w *cacheWidget) []string { return nil }); err == nil {
		t.Errorf("AddIndex accepted a second index named size")
	}
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	a, ok := inf.Get("default", "a")
	if !ok {
		t.Fatal("Get(default, a) found nothing")
	}
	if a.ManagedFields != nil {
		t.Errorf("managedFields were stored: %v", a.ManagedFields)
	}
	web := mustList(t, inf, ListOptions{Namespace: "default", Labels: labels.SelectorFromSet(labels.Set{"tier": "web"})})
	bySize := inf.ByIndex("size", "1")
	cacheEventually(t, "the initial events", func() bool { return len(rec.all()) == 2 })
	var fromEvent *cacheWidget
	for _, e := range rec.all() {
		if e.Object.Name == "a" {
			fromEvent = e.Object
		}
	}
	if len(web) != 1 || web[0] != a || len(bySize) != 1 || bySize[0] != a || fromEvent != a {
		t.Errorf("Get, List, ByIndex and the event do not share one stored object: %p %v %v %p", a, web, bySize, fromEvent)
	}
	if again, _ := inf.Get("default", "a"); again != a {
		t.Errorf("two Gets returned different pointers")
	}
	if got := mustList(t, inf, ListOptions{Namespace: "other"}); len(got) != 0 {
		t.Errorf("List(other) = %v, want nothing", got)
	}
	if got := inf.ByIndex("nope", "1"); got != nil {
		t.Errorf("ByIndex(unknown) = %v, want nil", got)
	}
	if n, b := inf.Stats(); n != 2 || b <= 0 {
		t.Errorf("Stats() = %d, %d; want 2 objects and some bytes", n, b)
	}
}

func TestInformerFault_KeepManagedFieldsAndTransform_AreApplied(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		if c.kind == "list" {
			a := cacheWidgetAt("a", "1", 1)
			a.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
			a.Annotations = map[string]string{"big": "x"}
			c.list("2", "", a)
			return
		}
		c.hang()
	})
	conn, _ := NewConn(&rest.Config{Host: f.url})
	c := NewCache(conn, CacheOptions{KeepManagedFields: true})
	if err := TransformFor(c, func(w *cacheWidget) { w.Annotations = nil }); err != nil {
		t.Fatal(err)
	}
	inf, _ := InformerFor[cacheWidget](c)
	if err := TransformFor(c, func(w *cacheWidget) {}); err == nil {
		t.Errorf("TransformFor after the informer was made succeeded")
	}
	if err := ScopeFor[cacheWidget](c, Scope{}); err == nil {
		t.Errorf("ScopeFor after the informer was made succeeded")
	}
	if again, _ := InformerFor[cacheWidget](c); again != inf {
		t.Errorf("InformerFor made a second informer for one type")
	}
	startCache(t, c)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	a, _ := inf.Get("default", "a")
	if len(a.ManagedFields) != 1 || a.Annotations != nil {
		t.Errorf("stored %+v: want managedFields kept and annotations cleared by the transform", a.ObjectMeta)
	}
}

func TestInformerFault_Namespaces_OneWatchEachIntoOneStore(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		ns := strings.Split(c.r.URL.Path, "/")[5] // /apis/group/v1/namespaces/NS/widgets
		switch {
		case c.kind == "list":
			w := cacheWidgetAt("w-"+ns, "1", 1)
			w.Namespace = ns
			c.list("1", "", w)
		default:
			c.hang()
		}
	})
	conn, _ := NewConn(&rest.Config{Host: f.url})
	c := NewCache(conn, CacheOptions{DefaultScope: Scope{Namespaces: []string{"b", "a", "b"}}})
	inf, _ := InformerFor[cacheWidget](c)
	startCache(t, c)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := len(mustList(t, inf, ListOptions{})); got != 2 {
		t.Errorf("List() has %d objects, want 2 (one per namespace)", got)
	}
	if _, ok := inf.Get("b", "w-b"); !ok {
		t.Errorf("Get(b, w-b) found nothing")
	}
	cacheEventually(t, "two watches", func() bool { return f.count("watch") == 2 })
	if f.count("list") != 2 {
		t.Errorf("requests %q: want one list and one watch per namespace", f.requests())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := inf.waitForObject(ctx, "c", "x", "99"); err != nil {
		t.Errorf("waitForObject in namespace c, outside the scope = %v, want nil at once", err)
	}
}

func TestInformerFault_LateHandlerAndResync_GetExistingObjects(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		if c.kind == "list" {
			c.list("2", "", cacheWidgetAt("a", "1", 1))
			return
		}
		c.hang()
	})
	inf, _, _ := fakeInformer(t, f, CacheOptions{Resync: 20 * time.Millisecond})
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	late := &eventRecorder[cacheWidget]{}
	inf.AddHandler(late.handle)
	cacheEventually(t, "a resync", func() bool { return len(late.all()) >= 2 })
	got := late.all()
	if describeEvent(got[0]) != "Added a@1 initial" || describeEvent(got[1]) != "Updated a@1 resync" || got[1].Old != got[1].Object {
		t.Errorf("late handler got %q, want the initial replay then resyncs with Old == Object", describeEvents(got))
	}
}

func TestInformerFault_WaitForResourceVersion_ReturnsOnceABookmarkPassesIt(t *testing.T) {
	checkNoCacheLeaks(t)
	bookmark := make(chan struct{})
	f := newFakeAPI(t, func(c fakeCall) {
		switch {
		case c.kind == "list":
			c.list("10", "", cacheWidgetAt("a", "9", 1))
		case c.n == 1:
			c.send("MODIFIED", cacheWidgetAt("a", "11", 2))
			select { // or the server's Close would wait for this handler forever after a failure
			case <-bookmark:
			case <-c.r.Context().Done():
				return
			}
			b := cacheWidgetAt("", "100", 0)
			c.send("BOOKMARK", b)
			c.hang()
		default:
			c.hang()
		}
	})
	inf, _, _ := fakeInformer(t, f, CacheOptions{})
	if err := inf.WaitForResourceVersion(cacheTestCtx(t), "11"); err != nil {
		t.Fatal(err)
	}
	a, _ := inf.Get("default", "a")
	if a.ResourceVersion != "11" {
		t.Errorf("after WaitForResourceVersion(11), a is at %s", a.ResourceVersion)
	}
	if err := inf.waitForObject(cacheTestCtx(t), "default", "a", "11"); err != nil {
		t.Errorf("waitForObject(a@11) = %v", err)
	}
	if err := inf.waitForObject(cacheTestCtx(t), "default", "never-stored", "11"); err != nil {
		t.Errorf("waitForObject(never-stored@11) = %v, want nil: the watch is at 11", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	err := inf.WaitForResourceVersion(ctx, "50")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitForResourceVersion(50) before the bookmark = %v, want the deadline", err)
	}
	close(bookmark)
	if err := inf.WaitForResourceVersion(cacheTestCtx(t), "50"); err != nil {
		t.Errorf("WaitForResourceVersion(50) after a bookmark at 100 = %v", err)
	}
	if err := inf.WaitForResourceVersion(cacheTestCtx(t), "x1"); err == nil {
		t.Errorf("WaitForResourceVersion(x1) accepted a malformed resourceVersion")
	}
}

func TestCache_ClientReadOfAnUnscopedType_WarnsNamingTheType(t *testing.T) {
	conn, _ := NewConn(&rest.Config{Host: "http://127.0.0.1:1"})
	logs, logger := newCacheLogs()
	c := NewCache(conn, CacheOptions{Logger: logger})
	if _, err := InformerFor[cacheWidget](c); err != nil {
		t.Fatal(err)
	}
	if w := logs.lines("WARN"); len(w) != 0 {
		t.Errorf("a controller's informer warned: %q", w)
	}
	c2 := NewCache(conn, CacheOptions{Logger: logger})
	if _, err := readInformer[cacheWidget](c2); err != nil {
		t.Fatal(err)
	}
	if w := logs.lines("WARN"); len(w) != 1 || !strings.Contains(w[0], "widgets.cachetest.kctl.dev/v1") {
		t.Errorf("want one warning naming widgets.cachetest.kctl.dev/v1, got %q", w)
	}
	c3 := NewCache(conn, CacheOptions{Logger: logger})
	ScopeFor[cacheWidget](c3, Scope{Namespaces: []string{"a"}})
	readInformer[cacheWidget](c3)
	if w := logs.lines("WARN"); len(w) != 1 {
		t.Errorf("a scoped type warned: %q", w)
	}
	type unknown struct{ metav1.ObjectMeta }
	if _, err := InformerFor[unknown](c); err == nil {
		t.Errorf("InformerFor an undeclared type succeeded")
	}
}

func TestCache_InformerMadeAfterStart_RunsAndStops(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		if c.kind == "list" {
			c.list("2", "", cacheWidgetAt("a", "1", 1))
			return
		}
		c.hang()
	})
	conn, _ := NewConn(&rest.Config{Host: f.url})
	c := NewCache(conn, CacheOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	cacheEventually(t, "the cache to start", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.ctx != nil })
	if err := c.Start(ctx); err == nil {
		t.Errorf("a second Start succeeded")
	}
	inf, _ := InformerFor[cacheWidget](c)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start() = %v", err)
	}
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Errorf("WaitForSync after stop of a synced informer = %v", err)
	}
	if err := inf.Err(); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("Err() after stop = %v, want stopped", err)
	}
}

// A protobuf list in pages: each next page is asked for while the one before
// is decoded. A continue token that expires meanwhile relists from the start;
// every object is stored and reported once, and no fetch outlives the list.
func TestInformerFault_ProtobufPages_OverlapAndRelistOnExpiry(t *testing.T) {
	checkNoCacheLeaks(t)
	page := func(from, to int, rv, next string) []byte {
		list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: rv, Continue: next}}
		for i := from; i < to; i++ {
			list.Items = append(list.Items, *realisticPod(i))
		}
		raw, err := list.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return envelope("PodList", raw)
	}
	f := newFakeAPI(t, func(c fakeCall) {
		body := []byte(nil)
		switch tok := c.param("continue"); {
		case c.kind == "watch":
			c.hang()
			return
		case tok == "":
			body = page(0, 500, "10", fmt.Sprint("p2-", c.n))
		case strings.HasPrefix(tok, "p2-"):
			body = page(500, 1000, "10", "p3-"+tok[3:])
		case tok == "p3-1": // the first list's last page: expired
			c.status(410, metav1.StatusReasonExpired, "The provided continue parameter is too old")
			return
		default:
			body = page(1000, 1200, "10", "")
		}
		c.w.Header().Set("Content-Type", mediaProtobuf)
		c.w.Write(body)
	})
	conn, err := NewConn(&rest.Config{Host: f.url})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache(conn, CacheOptions{Logger: slog.New(slog.DiscardHandler)})
	pods, err := InformerFor[corev1.Pod](c)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	added := map[string]int{}
	pods.AddHandler(func(e Event[corev1.Pod]) {
		mu.Lock()
		defer mu.Unlock()
		added[e.Object.Name]++
	})
	startCache(t, c)
	cacheEventually(t, "the sync", pods.HasSynced)
	cacheEventually(t, "1200 Added events", func() bool { mu.Lock(); defer mu.Unlock(); return len(added) == 1200 })
	mu.Lock()
	for name, n := range added {
		if n != 1 {
			t.Errorf("%s added %d times", name, n)
		}
	}
	mu.Unlock()
	if n, _ := pods.Stats(); n != 1200 {
		t.Errorf("%d Pods stored, want 1200", n)
	}
	var lists []string
	for _, r := range f.requests() {
		if strings.HasPrefix(r, "list") {
			lists = append(lists, r[strings.Index(r, "continue="):])
		}
	}
	if want := []string{"continue=", "continue=p2-1", "continue=p3-1", "continue=", "continue=p2-4", "continue=p3-4"}; !slices.Equal(lists, want) {
		t.Errorf("lists asked for %q, want %q", lists, want)
	}
}

// While the first page is still being prepared for the store, the informer
// has asked for at most two pages more: read-ahead is bounded.
func TestInformerFault_ProtobufPages_ReadAheadIsBounded(t *testing.T) {
	checkNoCacheLeaks(t)
	const pages = 20
	var asked atomic.Int32
	f := newFakeAPI(t, func(c fakeCall) {
		if c.kind == "watch" {
			c.hang()
			return
		}
		asked.Add(1)
		n, _ := strconv.Atoi(c.param("continue"))
		list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}}
		if n+1 < pages {
			list.Continue = strconv.Itoa(n + 1)
		}
		for i := range 5 {
			list.Items = append(list.Items, *realisticPod(n*5 + i))
		}
		raw, _ := list.Marshal()
		c.w.Header().Set("Content-Type", mediaProtobuf)
		c.w.Write(envelope("PodList", raw))
	})
	conn, err := NewConn(&rest.Config{Host: f.url})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache(conn, CacheOptions{Logger: slog.New(slog.DiscardHandler)})
	var first atomic.Bool
	var askedWhileBlocked int32
	if err := TransformFor[corev1.Pod](c, func(p *corev1.Pod) {
		if first.CompareAndSwap(false, true) {
			for deadline := time.Now().Add(5 * time.Second); asked.Load() < 3 && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond) // room for a fourth request, which must not come
			askedWhileBlocked = asked.Load()
		}
	}); err != nil {
		t.Fatal(err)
	}
	pods, err := InformerFor[corev1.Pod](c)
	if err != nil {
		t.Fatal(err)
	}
	startCache(t, c)
	cacheEventually(t, "the sync", pods.HasSynced)
	if askedWhileBlocked != 3 {
		t.Errorf("%d pages asked for while page 1 was prepared, want 3 (it and two ahead)", askedWhileBlocked)
	}
	if n, _ := pods.Stats(); n != pages*5 {
		t.Errorf("%d Pods stored, want %d", n, pages*5)
	}
}

// Stopping the cache while a paged list is under way ends the list: pages
// asked for early that end with the stop do not leave it waiting.
func TestInformerFault_ProtobufPages_StopMidList(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		if c.kind == "watch" {
			c.hang()
			return
		}
		n, _ := strconv.Atoi(c.param("continue"))
		list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "10", Continue: strconv.Itoa(n + 1)}}
		list.Items = append(list.Items, *realisticPod(n))
		raw, _ := list.Marshal()
		c.w.Header().Set("Content-Type", mediaProtobuf)
		c.w.Write(envelope("PodList", raw)) // pages without end
	})
	conn, err := NewConn(&rest.Config{Host: f.url})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache(conn, CacheOptions{Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	var first atomic.Bool
	if err := TransformFor[corev1.Pod](c, func(p *corev1.Pod) {
		if first.CompareAndSwap(false, true) { // page 1 waits here until the stop
			cancel()
			time.Sleep(300 * time.Millisecond) // the fetches asked for early see the stop meanwhile
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := InformerFor[corev1.Pod](c); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Cache.Start did not return within 10s of its context ending mid-list")
	}
}
