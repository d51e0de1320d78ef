package kctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
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

// A type's Scope reaches the server: every list and every watch, one per
// namespace of the scope, sends the scope's label and field selectors.
func TestInformerFault_Scope_LabelsAndFieldsAreSentOnEveryListAndWatch(t *testing.T) {
	checkNoCacheLeaks(t)
	var mu sync.Mutex
	var got []string // "list a labels=... fields=...", one per request
	f := newFakeAPI(t, func(c fakeCall) {
		ns := strings.Split(c.r.URL.Path, "/")[5] // /apis/group/v1/namespaces/NS/widgets
		mu.Lock()
		got = append(got, fmt.Sprintf("%s %s labels=%s fields=%s", c.kind, ns, c.param("labelSelector"), c.param("fieldSelector")))
		mu.Unlock()
		if c.kind == "list" {
			c.list("1", "")
			return
		}
		c.hang()
	})
	conn, err := NewConn(&rest.Config{Host: f.url})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache(conn, CacheOptions{})
	scope := Scope{Namespaces: []string{"a", "b"}, Labels: labels.SelectorFromSet(labels.Set{"app": "web"}), Fields: "metadata.name=w"}
	if err := ScopeFor[cacheWidget](c, scope); err != nil {
		t.Fatal(err)
	}
	inf, err := InformerFor[cacheWidget](c)
	if err != nil {
		t.Fatal(err)
	}
	startCache(t, c)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "two watches", func() bool { return f.count("watch") == 2 })
	want := []string{
		"list a labels=app=web fields=metadata.name=w", "list b labels=app=web fields=metadata.name=w",
		"watch a labels=app=web fields=metadata.name=w", "watch b labels=app=web fields=metadata.name=w",
	}
	mu.Lock()
	defer mu.Unlock()
	if sorted := slices.Sorted(slices.Values(got)); !slices.Equal(sorted, want) {
		t.Errorf("requests:\n got %q\nwant %q", sorted, want)
	}
}

// A watch that stays open for the healthy time (10 s; shortened here) resets
// the backoff: when it fails, the retry counts as the first failure, not as
// one more after those before it.
func TestInformerFault_WatchOpenLongEnough_ResetsTheBackoff(t *testing.T) {
	checkNoCacheLeaks(t)
	// A quick failure must take less than healthy, even on a busy machine.
	const healthy, held = time.Second, 2 * time.Second
	f := newFakeAPI(t, func(c fakeCall) {
		switch {
		case c.kind == "list":
			c.list("10", "")
		case c.n <= 2:
			c.status(http.StatusInternalServerError, metav1.StatusReasonInternalError, "watch failed at once")
		case c.n == 3:
			c.w.(http.Flusher).Flush()
			select {
			case <-time.After(held): // open for longer than healthy, then cut
			case <-c.r.Context().Done():
				return
			}
			panic(http.ErrAbortHandler)
		default:
			c.hang()
		}
	})
	conn, err := NewConn(&rest.Config{Host: f.url})
	if err != nil {
		t.Fatal(err)
	}
	logs, logger := newCacheLogs()
	c := NewCache(conn, CacheOptions{Logger: logger})
	inf, err := InformerFor[cacheWidget](c)
	if err != nil {
		t.Fatal(err)
	}
	inf.healthy = healthy // before the informer runs
	startCache(t, c)
	eventually(t, "a fourth watch", func() bool { return f.count("watch") == 4 })
	lines := logs.lines("watch failed, retrying")
	wantFailures := []string{"failures=1 ", "failures=2 ", "failures=1 "}
	ok := len(lines) == len(wantFailures)
	for n := 0; ok && n < len(lines); n++ {
		ok = strings.Contains(lines[n], wantFailures[n])
	}
	if !ok {
		t.Errorf("want two quick failures, then a failure after a healthy watch counted as the first (%q); got:\n%s",
			wantFailures, strings.Join(lines, "\n"))
	}
}

// Fault injection for the informer with httptest: a fake API server for one
// declared JSON type whose every list and watch answer a test scripts. JSON
// keeps the frames readable; the informer does not care about the encoding.

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
		if fakeRefusesWatchList(w, r) {
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

func newCacheLogs() (*logBuffer, *slog.Logger) {
	b := &logBuffer{}
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
				!strings.Contains(stacks, "kctl.(*Cache)") && !strings.Contains(stacks, "transport.(*Stream[") {
				return
			}
			runtime.Gosched()
		}
		t.Errorf("goroutines leaked after the cache stopped:\n%s", stacks)
	})
}

// otherStacks returns the stacks of every goroutine but the caller's.
func otherStacks() []string {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	for n == len(buf) {
		buf = make([]byte, 2*len(buf))
		n = runtime.Stack(buf, true)
	}
	goroutines := strings.Split(string(buf[:n]), "\n\n")
	return goroutines[1:] // the first is the caller's
}

// waitForStacks polls the other goroutines' stacks until done says so,
// for at most limit; it reports whether done did.
func waitForStacks(limit time.Duration, done func(stacks []string) bool) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if done(otherStacks()) {
			return true
		}
		time.Sleep(10 * time.Millisecond) // the poll's interval, as eventually's
	}
	return false
}

// fetchWaitingForRoom reports whether a page's fetch is parked in
// internal/readahead's select, waiting for room before it asks the
// server for anything: its first frame outside the runtime is there.
func fetchWaitingForRoom(stacks []string) bool {
	for _, g := range stacks {
		lines := strings.Split(g, "\n")
		if !strings.Contains(lines[0], "[select") {
			continue
		}
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "runtime.") || strings.HasPrefix(l, "\t") {
				continue
			}
			if strings.Contains(l, "internal/readahead.Pages") {
				return true
			}
			break
		}
	}
	return false
}

// noFetchLeft reports whether every goroutine internal/readahead started
// for a page has ended.
func noFetchLeft(stacks []string) bool {
	for _, g := range stacks {
		if strings.Contains(g, "internal/readahead.Pages") {
			return false
		}
	}
	return true
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
func fakeInformer(t *testing.T, f *fakeAPI, opts CacheOptions) (*Informer[cacheWidget], *eventRecorder[cacheWidget], *logBuffer) {
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
	eventually(t, fmt.Sprintf("events %q", want), func() bool { return len(rec.all()) >= len(want) })
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
	if l := logs.linesEventually(t, "could not decode", 1); len(l) == 0 || !strings.Contains(strings.Join(l, ""), "bad") {
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
	eventually(t, "the first list", inf.HasSynced)
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
	eventually(t, "four lists", func() bool { return f.count("list") >= 4 })
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
	eventually(t, "a Forbidden error", func() bool { return apierrors.IsForbidden(inf.Err()) })
	eventually(t, "the sync", inf.HasSynced)
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
	eventually(t, "not installed", func() bool { return errors.Is(inf.Err(), ErrNotInstalled) })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err := inf.WaitForSync(ctx)
	cancel()
	if !errors.Is(err, ErrNotInstalled) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "widgets") {
		t.Errorf("WaitForSync() = %v, want an error naming widgets, matching ErrNotInstalled and the deadline", err)
	}
	setInstalled(true)
	wantEvents(t, rec, "Added a@4 initial")
	eventually(t, "healthy", func() bool { return inf.Err() == nil })
	setInstalled(false)
	eventually(t, "not installed again", func() bool { return errors.Is(inf.Err(), ErrNotInstalled) })
	if n := len(logs.lines("level=WARN")); n > 4 {
		t.Errorf("%d warnings for a missing CRD; want the first of each outage only:\n%s", n, logs)
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
	eventually(t, "the sync", pods.HasSynced)
	eventually(t, "1200 Added events", func() bool { mu.Lock(); defer mu.Unlock(); return len(added) == 1200 })
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
			// Once a fetch waits for room, nothing more is asked for until
			// page 1 is used: the count is final.
			if !waitForStacks(10*time.Second, fetchWaitingForRoom) {
				t.Error("no page's fetch waited for room within 10s while page 1 was prepared")
			}
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
	eventually(t, "the sync", pods.HasSynced)
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
			// The fetches asked for early end with the stop meanwhile.
			if !waitForStacks(10*time.Second, noFetchLeft) {
				t.Error("the pages asked for early had not ended 10s after the stop")
			}
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

func TestInformerFault_ListWithAnUndecodableObject_SyncsTheOthersAndLogsIt(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		if c.kind == "watch" {
			c.hang()
			return
		}
		c.w.Header().Set("Content-Type", "application/json")
		c.w.Write([]byte(`{"metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"a","namespace":"default","resourceVersion":"3"}},` +
			`{"metadata":{"name":"bad","namespace":"default"},"spec":{"size":"huge"}}]}`))
	})
	inf, rec, logs := fakeInformer(t, f, CacheOptions{})
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, rec, "Added a@3 initial")
	if l := logs.linesEventually(t, "could not decode", 1); len(l) != 1 || !strings.Contains(l[0], "default/bad") {
		t.Errorf("want one log line naming default/bad, got:\n%s", logs)
	}
	if f.count("list") != 1 {
		t.Errorf("%d lists, want 1: an undecodable object must not fail the list", f.count("list"))
	}
}

func TestInformerFault_ProtobufPods_StoredWithoutManagedFieldsAndBadOnesSkipped(t *testing.T) {
	checkNoCacheLeaks(t)
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			w.Header().Set("Content-Type", mediaProtobuf+";stream=watch")
			w.Write(watchFrame("MODIFIED", envelope("Pod", badPodProto("shop", "broken-2"))))
			w.Write(watchFrame("ADDED", podProto(realisticPod(2))))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", mediaProtobuf)
		w.Write(podPage("9", "", rawPod(0), badPodProto("shop", "broken-1"), rawPod(1)))
	})
	for _, keep := range []bool{false, true} {
		logs, logger := newCacheLogs()
		c := NewCache(conn, CacheOptions{KeepManagedFields: keep, Logger: logger})
		inf, err := InformerFor[corev1.Pod](c)
		if err != nil {
			t.Fatal(err)
		}
		startCache(t, c)
		if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the pod added by the watch", func() bool { _, ok := inf.Get("shop", realisticPod(2).Name); return ok })
		for i := range 3 {
			want := realisticPod(i)
			want.APIVersion, want.Kind = "v1", "Pod"
			if !keep {
				want.ManagedFields = nil
			}
			if got, _ := inf.Get("shop", want.Name); !reflect.DeepEqual(got, want) {
				t.Errorf("KeepManagedFields=%v: stored pod %d =\n%+v\nwant\n%+v", keep, i, got, want)
			}
		}
		if l := logs.linesEventually(t, "could not decode", 2); len(l) != 2 || !strings.Contains(l[0], "shop/broken-1") || !strings.Contains(l[1], "shop/broken-2") {
			t.Errorf("KeepManagedFields=%v: want log lines naming shop/broken-1 and shop/broken-2, got:\n%s", keep, logs)
		}
	}
}
