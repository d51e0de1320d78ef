package kctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// Issue 15 item 7: objects that stop decoding into T.

func badKey(ns, name, rv string) *decodeError {
	return &decodeError{Namespace: ns, Name: name, ResourceVersion: rv, Err: errors.New("kctl: decoding " + ns + "/" + name + ": bad")}
}

// A relist takes an object it lists but cannot decode for one that exists:
// its last good copy stays, and nothing is reported for it.
func TestStore_Replace_NeverTakesAnUndecodableObjectForDeleted(t *testing.T) {
	s := newStore[*corev1.ConfigMap]()
	var got []string
	changed := func(typ EventType, obj, _ *corev1.ConfigMap) {
		got = append(got, fmt.Sprintf("%v %s@%s", typ, obj.Name, obj.ResourceVersion))
	}
	step := func(n int, want ...string) {
		t.Helper()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("step %d: replace reported %q, want %q", n, got, want)
		}
		got = nil
	}
	b1 := storeCM("x", "b", "2", nil)
	s.replace("", []*corev1.ConfigMap{storeCM("x", "a", "1", nil), b1, storeCM("x", "c", "3", nil)}, nil, changed)
	got = nil

	s.replace("", []*corev1.ConfigMap{storeCM("x", "a", "1", nil)}, []*decodeError{badKey("x", "b", "4"), badKey("x", "never", "5")}, changed)
	step(1, "Deleted c@3")
	if b, ok := s.get("x", "b"); !ok || b != b1 {
		t.Errorf("step 1: get(x, b) = %v, %v; want the last good copy b@2", b, ok)
	}
	if s.bad.Len() != 2 {
		t.Errorf("step 1: %d objects marked undecodable, want b and never", s.bad.Len())
	}

	s.replace("", []*corev1.ConfigMap{storeCM("x", "a", "1", nil), storeCM("x", "b", "6", nil)}, nil, changed)
	step(2, "Updated b@6") // b decodes again; never is gone from the server
	if s.bad.Len() != 0 {
		t.Errorf("step 2: %d objects still marked undecodable, want none", s.bad.Len())
	}

	s.bad.Mark(objKey{"x", "b"}, badKey("x", "b", "7")) // by a watch event
	s.replace("", []*corev1.ConfigMap{storeCM("x", "a", "1", nil)}, nil, changed)
	step(3, "Deleted b@6") // deleted while undecodable: its last good copy goes
	if s.bad.Len() != 0 {
		t.Errorf("step 3: %d objects still marked undecodable, want none", s.bad.Len())
	}

	s.replace("", []*corev1.ConfigMap{storeCM("x", "d", "8", nil)}, []*decodeError{{Err: errors.New("no metadata")}}, changed)
	step(4, "Added d@8") // one undecodable without a key: a might be it, so it is kept
	if _, ok := s.get("x", "a"); !ok {
		t.Errorf("step 4: a was deleted by a list with an object of unknown key")
	}
}

// rawWidgetList answers a list with items given as raw JSON.
func rawWidgetList(c fakeCall, rv string, items ...string) {
	c.w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(c.w, `{"apiVersion":"cachetest.kctl.dev/v1","kind":"WidgetList","metadata":{"resourceVersion":%q},"items":[%s]}`,
		rv, strings.Join(items, ","))
}

func rawWidget(name, rv, size string) string {
	return fmt.Sprintf(`{"metadata":{"namespace":"default","name":%q,"resourceVersion":%q},"spec":{"size":%s}}`, name, rv, size)
}

// An object that stops decoding keeps its last good copy across updates and
// a relist, its delete removes it (Deleted with that copy), one that decodes
// again comes back, and each is logged once.
func TestInformerFault_ObjectThatStopsDecoding_IsKeptUntilDeletedAndReportedOnce(t *testing.T) {
	checkNoCacheLeaks(t)
	f := newFakeAPI(t, func(c fakeCall) {
		switch {
		case c.kind == "list" && c.n == 1:
			rawWidgetList(c, "2", rawWidget("a", "1", "1"), rawWidget("b", "2", `"huge"`))
		case c.kind == "list":
			rawWidgetList(c, "4", rawWidget("a", "4", `"huger"`), rawWidget("b", "2", `"huge"`))
		case c.n == 1:
			c.send("MODIFIED", json.RawMessage(rawWidget("a", "3", `"big"`)))
			c.send("MODIFIED", json.RawMessage(rawWidget("a", "4", `"huger"`)))
			c.send("ERROR", json.RawMessage(fakeStatusJSON(410, metav1.StatusReasonExpired, "too old resource version: 2 (4)")))
			c.hang()
		case c.n == 2:
			c.send("DELETED", json.RawMessage(rawWidget("a", "5", `"huger"`)))
			c.send("MODIFIED", json.RawMessage(rawWidget("b", "6", "2")))
			c.hang()
		default:
			c.hang()
		}
	})
	inf, rec, logs := fakeInformer(t, f, CacheOptions{})
	wantEvents(t, rec, "Added a@1 initial", "Deleted a@1", "Added b@6")
	if n := inf.Undecodable(); n != 0 {
		t.Errorf("Undecodable() = %d at the end, want 0", n)
	}
	if _, ok := inf.Get("default", "a"); ok {
		t.Errorf("a is still cached after its delete")
	}
	if got := f.count("list"); got != 2 {
		t.Errorf("%d lists, want 2 (the relist must have run)", got)
	}
	bad := logs.linesEventually(t, "could not decode an object: it keeps", 2)
	if len(bad) != 2 || !strings.Contains(bad[0], "default/b") || !strings.Contains(bad[1], "default/a") {
		t.Errorf("want one log line for b (the first list) and one for a (its first bad update), got:\n%s", logs)
	}
	if again := logs.lines("decodes an object again"); len(again) != 1 || !strings.Contains(again[0], "default/b") {
		t.Errorf("want one log line saying b decodes again, got:\n%s", logs)
	}
}

// dial is a Go type whose spec.turns is an int, over a CRD whose spec the
// server does not check: a write can make a Dial that does not decode.
type dial struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Turns int `json:"turns,omitempty"`
	} `json:"spec,omitempty"`
}

var _ = Declare[dial](Resource{Group: "kctl.example.com", Version: "v1", Kind: "Dial", Namespaced: true})

const dialCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"dials.kctl.example.com"},
"spec":{"group":"kctl.example.com","scope":"Namespaced","names":{"plural":"dials","singular":"dial","kind":"Dial","listKind":"DialList"},
"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{
"spec":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}]}}`

// installDialCRD applies the Dial CRD and returns an uncached client once the server serves it.
func installDialCRD(t *testing.T, cfg *rest.Config) *Client[dial] {
	t.Helper()
	code, body := testRawRequest(t, cfg, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", dialCRD)
	if code != http.StatusCreated && code != http.StatusConflict {
		t.Fatalf("creating the Dial CRD: %d %s", code, body)
	}
	dials := NewClient[dial](mustConn(t, cfg))
	eventually(t, "the Dial CRD to be served", func() bool {
		_, err := dials.List(t.Context(), ListOptions{Namespace: "default"})
		return err == nil
	})
	return dials
}

// setTurns writes spec.turns as raw JSON (e.g. `"three"`, which does not decode into dial).
func setTurns(t *testing.T, dials *Client[dial], ns, name, turns string) {
	t.Helper()
	_, err := dials.patch(t.Context(), ns, name, MergePatch, []byte(`{"spec":{"turns":`+turns+`}}`), PatchOptions{})
	if _, undecodable := errors.AsType[*decodeError](err); err != nil && !undecodable {
		t.Fatalf("patching dial %s/%s: %v", ns, name, err)
	}
}

// goneOnce, armed, cuts the open watch and answers the next watch request
// with 410 Gone, as a server whose watch cache no longer holds the
// informer's resourceVersion does: fault injection that makes the informer
// relist from the real server.
type goneOnce struct {
	mu     sync.Mutex
	armed  bool
	cancel context.CancelFunc // the open watch's
}

func (g *goneOnce) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = true
	if g.cancel != nil {
		g.cancel()
	}
}

func (g *goneOnce) fired() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.armed
}

func (g *goneOnce) wrap(rt http.RoundTripper) http.RoundTripper {
	return partitionRoundTrip(func(r *http.Request) (*http.Response, error) {
		if r.URL.Query().Get("watch") != "true" {
			return rt.RoundTrip(r)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.armed {
			g.armed = false
			body := fakeStatusJSON(http.StatusGone, metav1.StatusReasonExpired, "too old resource version (fault injected by the test)")
			return &http.Response{StatusCode: http.StatusGone, Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
		}
		ctx, cancel := context.WithCancel(r.Context())
		g.cancel = cancel
		return rt.RoundTrip(r.WithContext(ctx))
	})
}

// Against the server: a Dial whose spec.turns is made a string stays cached
// (last good copy) through a relist, without OnDelete; its delete runs
// OnDelete once; one that decodes again is reconciled; each is logged once
// and counted while it does not decode, by Undecodable and on the metrics
// page as kctl_cache_undecodable_objects.
func TestController_ObjectThatStopsDecoding_OnDeleteRunsOnlyAtItsDelete(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	dials := installDialCRD(t, cfg)
	for _, name := range []string{"a", "b", "c"} {
		d := &dial{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		d.Spec.Turns = 1
		if err := dials.Create(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	setTurns(t, dials, ns, "c", `"three"`) // undecodable before the first list
	gone := &goneOnce{}
	cut := rest.CopyConfig(cfg)
	cut.WrapTransport = gone.wrap
	logs, logger := newCacheLogs()
	m := testManager(t, cut, ns, Options{Logger: logger, Cache: CacheOptions{Logger: logger}})
	var mu sync.Mutex
	var deletes []string
	reconciled := map[string]int{} // name -> turns last seen
	c := NewController(m, "dials", func(ctx context.Context, d *dial) (Result, error) {
		mu.Lock()
		defer mu.Unlock()
		reconciled[d.Name] = d.Spec.Turns
		return Result{}, nil
	})
	c.OnDelete(func(ctx context.Context, d *dial) {
		mu.Lock()
		defer mu.Unlock()
		deletes = append(deletes, fmt.Sprintf("%s@%d", d.Name, d.Spec.Turns))
	})
	inf, err := InformerFor[dial](m.Cache())
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, m)
	onPage := func(want string) {
		t.Helper()
		const series = `kctl_cache_undecodable_objects{resource="dials.kctl.example.com/v1"}`
		if got := samples(scrapeMetrics(t, m.metrics.Handler()))[series]; got != want {
			t.Errorf("metrics page: %s = %q, want %s", series, got, want)
		}
	}
	seen := func(name string, turns int) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); v, ok := reconciled[name]; return ok && v == turns }
	}
	eventually(t, "a and b reconciled", func() bool { return seen("a", 1)() && seen("b", 1)() })
	if n := inf.Undecodable(); n != 1 {
		t.Errorf("Undecodable() = %d after the first list, want 1 (c)", n)
	}
	onPage("1")

	setTurns(t, dials, ns, "a", `"three"`)
	setTurns(t, dials, ns, "a", `"four"`)
	eventually(t, "a counted as undecodable", func() bool { return inf.Undecodable() == 2 })
	onPage("2")
	gone.arm()
	eventually(t, "the relist", func() bool { return gone.fired() && len(logs.lines("fault injected")) > 0 })
	setTurns(t, dials, ns, "b", "2") // a change after the relist: once seen, the relist is applied
	eventually(t, "b@2 reconciled", seen("b", 2))
	if a, ok := inf.Get(ns, "a"); !ok || a.Spec.Turns != 1 {
		t.Errorf("Get(a) = %v, %v after the relist; want the last good copy, turns 1", a, ok)
	}

	if err := dials.Delete(t.Context(), ns, "a"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "OnDelete of a", func() bool { mu.Lock(); defer mu.Unlock(); return len(deletes) > 0 })
	setTurns(t, dials, ns, "c", "3")
	eventually(t, "c@3 reconciled", seen("c", 3))
	if n := inf.Undecodable(); n != 0 {
		t.Errorf("Undecodable() = %d at the end, want 0", n)
	}
	onPage("0")
	mu.Lock()
	if !slices.Equal(deletes, []string{"a@1"}) {
		t.Errorf("OnDelete ran for %q, want once for a, with its last good copy (a@1)", deletes)
	}
	mu.Unlock()
	bad := logs.linesEventually(t, "could not decode an object: it keeps", 2)
	if len(bad) != 2 || !strings.Contains(bad[0], ns+"/c") || !strings.Contains(bad[1], ns+"/a") {
		t.Errorf("want one log line for c and one for a, got:\n%s", strings.Join(bad, "\n"))
	}
}
