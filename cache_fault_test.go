package kctl

// Fault injection for the informer with httptest: a fake API server for one
// declared JSON type whose every list and watch answer a test scripts. JSON
// keeps the frames readable; the informer does not care about the encoding.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
