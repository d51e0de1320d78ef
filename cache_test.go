package kctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
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
	"k8s.io/client-go/rest"
)

// Integration tests against the control plane's kube-apiserver.

// cmInformer starts a cache on cfg holding the ConfigMaps of namespace ns and
// returns its informer, with a recording handler.
func cmInformer(t *testing.T, cfg *rest.Config, ns string) (*Informer[corev1.ConfigMap], *eventRecorder[corev1.ConfigMap], *logBuffer) {
	t.Helper()
	conn, err := NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	logs, logger := newCacheLogs()
	c := NewCache(conn, CacheOptions{Logger: logger})
	if err := ScopeFor[corev1.ConfigMap](c, Scope{Namespaces: []string{ns}}); err != nil {
		t.Fatal(err)
	}
	inf, err := InformerFor[corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	rec := &eventRecorder[corev1.ConfigMap]{}
	inf.AddHandler(rec.handle)
	startCache(t, c)
	return inf, rec, logs
}

// replayEvents applies events to a model of the store (name -> resourceVersion)
// and lists the impossible ones: an Added for a stored object, an Updated or
// Deleted for a missing one.
func replayEvents[T any](events []Event[T]) (model map[string]string, wrong []string) {
	model = map[string]string{}
	for _, e := range events {
		m := metaOf(e.Object)
		if _, had := model[m.GetName()]; had == (e.Type == Added) {
			wrong = append(wrong, describeEvent(e))
		}
		if e.Type == Deleted {
			delete(model, m.GetName())
		} else {
			model[m.GetName()] = m.GetResourceVersion()
		}
	}
	return model, wrong
}

// wantReplay waits until the events replayed equal the server's objects.
func wantReplay[T any](t *testing.T, rec *eventRecorder[T], server []*T) {
	t.Helper()
	want := storeModel(server)
	eventually(t, "the events to reach the server's state", func() bool { got, _ := replayEvents(rec.all()); return sameModel(got, want) })
	if _, wrong := replayEvents(rec.all()); len(wrong) > 0 {
		t.Errorf("impossible events (duplicate adds, or changes of missing objects): %q", wrong)
	}
}

func storeModel[T any](objs []*T) map[string]string {
	out := map[string]string{}
	for _, o := range objs {
		out[metaOf(o).GetName()] = metaOf(o).GetResourceVersion()
	}
	return out
}

func sameModel(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func newCM(ns, name, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"v": value}}
}

func TestInformer_CreateUpdateDelete_AreSeenInOrder(t *testing.T) {
	checkNoCacheLeaks(t)
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	inf, rec, _ := cmInformer(t, cfg, ns)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	conn, _ := NewConn(cfg)
	cms := NewClient[corev1.ConfigMap](conn)
	cm := newCM(ns, "a", "1")
	if err := cms.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	created := cm.ResourceVersion
	cm.Data["v"] = "2"
	if err := cms.Update(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	if err := inf.WaitForResourceVersion(cacheTestCtx(t), cm.ResourceVersion); err != nil {
		t.Fatal(err)
	}
	if got, _ := inf.Get(ns, "a"); got == nil || got.Data["v"] != "2" || got.ManagedFields != nil {
		t.Errorf("after WaitForResourceVersion the cache holds %v, want v=2 without managedFields", got)
	}
	if err := cms.Delete(t.Context(), ns, "a"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "three events", func() bool { return len(rec.all()) == 3 })
	events := rec.all()
	got := describeEvents(events)
	want := []string{"Added a@" + created, "Updated a@" + cm.ResourceVersion}
	if !slices.Equal(got[:2], want) || events[2].Type != Deleted || events[1].Old != events[0].Object {
		t.Errorf("events %q, want %q then a Deleted, and Updated.Old the Added object", got, want)
	}
	if n, b := inf.Stats(); n != 0 || b != 0 {
		t.Errorf("Stats() = %d, %d after the delete; want 0, 0", n, b)
	}
}

// partition is a transport that can cut a client off the API server: open
// requests (watches) end and new ones fail until heal.
type partition struct {
	mu      sync.Mutex
	down    bool
	cancels map[*http.Request]context.CancelFunc
}

type partitionRoundTrip func(*http.Request) (*http.Response, error)

func (f partitionRoundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (p *partition) wrap(rt http.RoundTripper) http.RoundTripper {
	return partitionRoundTrip(func(r *http.Request) (*http.Response, error) {
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			return nil, errors.New("partitioned: connection refused")
		}
		ctx, cancel := context.WithCancel(r.Context())
		r = r.WithContext(ctx)
		p.cancels[r] = cancel
		p.mu.Unlock()
		resp, err := rt.RoundTrip(r)
		if err != nil {
			p.forget(r)
			return nil, err
		}
		resp.Body = &partitionBody{ReadCloser: resp.Body, done: func() { p.forget(r) }}
		return resp, nil
	})
}

func (p *partition) forget(r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cancel, ok := p.cancels[r]; ok {
		cancel()
		delete(p.cancels, r)
	}
}

func (p *partition) set(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	for r, cancel := range p.cancels {
		if down {
			cancel()
			delete(p.cancels, r)
		}
	}
}

type partitionBody struct {
	io.ReadCloser
	done func()
}

func (b *partitionBody) Close() error { err := b.ReadCloser.Close(); b.done(); return err }

func TestInformer_APIServerRestartedMidWatch_CacheEqualsTheServer(t *testing.T) {
	checkNoCacheLeaks(t)
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	conn, _ := NewConn(cfg)
	cms := NewClient[corev1.ConfigMap](conn)
	for i := range 10 {
		if err := cms.Create(t.Context(), newCM(ns, fmt.Sprint("cm-", i), "0")); err != nil {
			t.Fatal(err)
		}
	}
	inf, rec, _ := cmInformer(t, cfg, ns)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	// A writer creates, updates and deletes ConfigMaps (failing while the
	// server is down) until stopped.
	stop, stopped := make(chan struct{}), make(chan struct{})
	var writes sync.WaitGroup
	writes.Go(func() {
		defer close(stopped)
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			name := fmt.Sprint("cm-", rand.N(20))
			switch cm, err := cms.Get(ctx, ns, name); {
			case apierrors.IsNotFound(err):
				cms.Create(ctx, newCM(ns, name, "0"))
			case err == nil && n%4 == 0:
				cms.Delete(ctx, ns, name)
			case err == nil:
				cm.Data["v"] = fmt.Sprint(n)
				cms.Update(ctx, cm)
			}
			cancel()
		}
	})
	eventually(t, "some writes seen", func() bool { return len(rec.all()) > 20 })
	restartAPIServer(t)
	seen := len(rec.all())
	eventually(t, "writes seen after the restart", func() bool { return len(rec.all()) > seen+20 })
	close(stop)
	<-stopped
	writes.Wait()
	server, err := cms.List(t.Context(), ListOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	want := storeModel(server)
	eventually(t, "the cache to equal the server", func() bool { return sameModel(storeModel(mustList(t, inf, ListOptions{})), want) })
	wantReplay(t, rec, server)
}

func TestInformer_CompactedResourceVersion_RelistsWithCorrectEvents(t *testing.T) {
	checkNoCacheLeaks(t)
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	conn, _ := NewConn(cfg)
	cms := NewClient[corev1.ConfigMap](conn)
	for _, name := range []string{"a", "b", "c"} {
		if err := cms.Create(t.Context(), newCM(ns, name, "0")); err != nil {
			t.Fatal(err)
		}
	}
	p := &partition{cancels: map[*http.Request]context.CancelFunc{}}
	cut := rest.CopyConfig(cfg)
	cut.WrapTransport = p.wrap
	inf, rec, logs := cmInformer(t, cut, ns)
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the initial events", func() bool { return len(rec.all()) == 3 })
	p.set(true)
	eventually(t, "the informer to notice the partition", func() bool { return inf.Err() != nil })
	b, _ := cms.Get(t.Context(), ns, "b")
	b.Data["v"] = "1"
	if err := cms.Update(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(t.Context(), ns, "c"); err != nil {
		t.Fatal(err)
	}
	d := newCM(ns, "d", "0")
	if err := cms.Create(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	etcdCompact(t)
	restartAPIServer(t) // empties the watch cache: the informer's resourceVersion is now gone
	p.set(false)
	eventually(t, "the relist's events", func() bool { return len(rec.all()) >= 6 })
	got := describeEvents(rec.all()[3:])
	slices.Sort(got)
	want := []string{"Added d@" + d.ResourceVersion + " relisted", "Deleted c@", "Updated b@" + b.ResourceVersion + " relisted"}
	if len(got) != 3 || got[0] != want[0] || !strings.HasPrefix(got[1], want[1]) || !strings.HasSuffix(got[1], " relisted") || got[2] != want[2] {
		t.Errorf("events after the relist: %q, want %q", got, want)
	}
	if len(logs.lines("too old resource version")) == 0 && len(logs.lines("Expired")) == 0 {
		t.Errorf("no 410 was logged; the relist had another cause:\n%s", logs)
	}
	server, _ := cms.List(t.Context(), ListOptions{Namespace: ns})
	wantReplay(t, rec, server)
}

func TestInformer_Forbidden_BacksOffAndReports(t *testing.T) {
	checkNoCacheLeaks(t)
	ns := testNamespace(t, testConfig(t))
	start := time.Now()
	inf, _, logs := cmInformer(t, testUnprivilegedConfig(t), ns)
	eventually(t, "Err() to report Forbidden", func() bool { return apierrors.IsForbidden(inf.Err()) })
	eventually(t, "four failed lists", func() bool { return len(logs.lines("list failed")) >= 4 })
	if d := time.Since(start); d < 700*time.Millisecond {
		t.Errorf("four lists failed within %v: no backoff (want at least 100+200+400ms)", d)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := inf.WaitForSync(ctx); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "configmaps") {
		t.Errorf("WaitForSync() = %v, want a Forbidden error naming configmaps", err)
	}
}

// crdWidget is served by a CRD that TestInformer_CRDInstalledLaterAndDeleted installs.
type crdWidget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              map[string]string `json:"spec,omitempty"`
}

var _ = Declare[crdWidget](Resource{Group: "crd.cachetest.kctl.dev", Version: "v1", Kind: "CRDWidget", Plural: "crdwidgets", Namespaced: true})

const crdWidgetCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"crdwidgets.crd.cachetest.kctl.dev"},
 "spec":{"group":"crd.cachetest.kctl.dev","scope":"Namespaced",
  "names":{"plural":"crdwidgets","singular":"crdwidget","kind":"CRDWidget","listKind":"CRDWidgetList"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

func TestInformer_CRDInstalledLaterAndDeleted_ReportsNotInstalledAndRecovers(t *testing.T) {
	checkNoCacheLeaks(t)
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	const crdPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crdwidgets.crd.cachetest.kctl.dev"
	uninstall := func() {
		testRawRequest(t, cfg, "DELETE", crdPath, "")
		eventually(t, "the CRD to be gone", func() bool { code, _ := testRawRequest(t, cfg, "GET", crdPath, ""); return code == 404 })
	}
	uninstall()

	conn, _ := NewConn(cfg)
	logs, logger := newCacheLogs()
	c := NewCache(conn, CacheOptions{DefaultScope: Scope{Namespaces: []string{ns}}, Logger: logger})
	inf, _ := InformerFor[crdWidget](c)
	rec := &eventRecorder[crdWidget]{}
	inf.AddHandler(rec.handle)
	startCache(t, c)
	eventually(t, "not installed", func() bool { return errors.Is(inf.Err(), ErrNotInstalled) })
	if !strings.Contains(inf.Err().Error(), "crdwidgets") {
		t.Errorf("Err() = %v, want it to name crdwidgets", inf.Err())
	}

	if code, body := testRawRequest(t, cfg, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crdWidgetCRD); code != 201 {
		t.Fatalf("creating the CRD: %d %s", code, body)
	}
	if err := inf.WaitForSync(cacheTestCtx(t)); err != nil {
		t.Fatal(err)
	}
	cr := `{"apiVersion":"crd.cachetest.kctl.dev/v1","kind":"CRDWidget","metadata":{"name":"w"},"spec":{"a":"b"}}`
	if code, body := testRawRequest(t, cfg, "POST", "/apis/crd.cachetest.kctl.dev/v1/namespaces/"+ns+"/crdwidgets", cr); code != 201 {
		t.Fatalf("creating a CRDWidget: %d %s", code, body)
	}
	eventually(t, "the widget's Added event", func() bool { return len(rec.all()) == 1 })
	if got := describeEvent(rec.all()[0]); !strings.HasPrefix(got, "Added w@") {
		t.Errorf("event %q, want Added w", got)
	}

	uninstall()
	eventually(t, "not installed again", func() bool { return errors.Is(inf.Err(), ErrNotInstalled) })
	eventually(t, "the widget's Deleted event", func() bool { return len(rec.all()) == 2 })
	if e := rec.all()[1]; e.Type != Deleted || e.Object.Name != "w" {
		t.Errorf("event %q, want Deleted w", describeEvent(e))
	}
	if n := len(slices.DeleteFunc(logs.lines("is not installed"), func(l string) bool { return !strings.Contains(l, "level=WARN") })); n > 3 {
		t.Errorf("%d warnings for a missing CRD, want one per outage (the poll goes on at debug level):\n%s", n, logs)
	}
}

// Issue 25, item 11: with ReaderFailOnMissingInformer a cached read of a
// type the cache does not watch is an error, not a new informer.
func TestCache_ReaderFailOnMissingInformer_ReadOfAnUnwatchedTypeFails(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{Cache: CacheOptions{ReaderFailOnMissingInformer: true}})
	secrets := ClientFor[corev1.Secret](mgr)
	cms := ClientFor[corev1.ConfigMap](mgr)
	if _, err := InformerFor[corev1.ConfigMap](mgr.Cache()); err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	ctx := t.Context()

	_, err := secrets.Get(ctx, ns, "s")
	if !errors.Is(err, ErrNotCached) {
		t.Fatalf("cached Get of an unwatched type = %v, want ErrNotCached", err)
	}
	for _, want := range []string{"secrets/v1", "ReaderFailOnMissingInformer", "kctl.InformerFor", "Uncached()"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := secrets.List(ctx, ListOptions{Namespace: ns}); !errors.Is(err, ErrNotCached) {
		t.Errorf("cached List of an unwatched type = %v, want ErrNotCached", err)
	}
	mgr.cache.mu.Lock()
	n := len(mgr.cache.informers)
	mgr.cache.mu.Unlock()
	if n != 1 {
		t.Errorf("the cache has %d informers after the failed reads, want 1 (ConfigMaps)", n)
	}
	// A watched type reads as usual.
	if err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, ns, "c"); err != nil {
		t.Errorf("cached Get of a watched type: %v", err)
	}
}

// Every informer of the Manager's cache is on its metrics page once, also
// one made only by a cached client read (no controller, no source): the
// README promises kctl_cache_objects, kctl_cache_bytes and
// kctl_cache_undecodable_objects per cached resource.
func TestManager_TypeCachedOnlyByAClientRead_IsOnTheMetricsPageOnce(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	uncached := NewClient[corev1.Secret](mustConn(t, cfg))
	for _, name := range []string{"a", "b"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"k": "v"}}
		if err := uncached.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	mgr := testManager(t, cfg, ns, Options{})
	startManager(t, mgr)
	secrets := ClientFor[corev1.Secret](mgr)
	if _, err := secrets.Get(t.Context(), ns, "a"); err != nil {
		t.Fatalf("cached Get(%s, a): %v", ns, err)
	}
	list, err := secrets.List(t.Context(), ListOptions{Namespace: ns})
	if err != nil {
		t.Fatalf("cached List(%s): %v", ns, err)
	}

	body := scrapeMetrics(t, mgr.metrics.Handler())
	page := samples(body)
	const r = `{resource="secrets/v1"}`
	if got, want := page["kctl_cache_objects"+r], strconv.Itoa(len(list)); got != want {
		t.Errorf("kctl_cache_objects%s = %q, want %s (what the cached List returned)", r, got, want)
	}
	if got := value(t, page, "kctl_cache_bytes"+r); got <= 0 {
		t.Errorf("kctl_cache_bytes%s = %v, want the encoded size of %d Secrets", r, got, len(list))
	}
	if got := page["kctl_cache_undecodable_objects"+r]; got != "0" {
		t.Errorf("kctl_cache_undecodable_objects%s = %q, want 0", r, got)
	}
	for _, family := range []string{"kctl_cache_objects", "kctl_cache_bytes", "kctl_cache_undecodable_objects"} {
		if n := strings.Count(body, "\n"+family+r+" "); n != 1 {
			t.Errorf("%s%s is on the page %d times, want once:\n%s", family, r, n, body)
		}
	}
}

// A controller's own type that a client also reads, and a source's type,
// are each on the page once: the cache registers an informer when it makes
// it, whoever asks first.
func TestManager_TypeOfAControllerAndOfAClientRead_IsOnTheMetricsPageOnce(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	reads := ClientFor[corev1.ConfigMap](mgr)
	c := NewController(mgr, "cms", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	Owns[corev1.Secret](c)
	startManager(t, mgr)
	if _, err := reads.List(t.Context(), ListOptions{Namespace: ns}); err != nil {
		t.Fatalf("cached List(%s): %v", ns, err)
	}
	body := scrapeMetrics(t, mgr.metrics.Handler())
	for _, r := range []string{`{resource="configmaps/v1"}`, `{resource="secrets/v1"}`} {
		for _, family := range []string{"kctl_cache_objects", "kctl_cache_bytes", "kctl_cache_undecodable_objects"} {
			if n := strings.Count(body, "\n"+family+r+" "); n != 1 {
				t.Errorf("%s%s is on the page %d times, want once:\n%s", family, r, n, body)
			}
		}
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
	eventually(t, "two watches", func() bool { return f.count("watch") == 2 })
	if f.count("list") != 2 {
		t.Errorf("requests %q: want one list and one watch per namespace", f.requests())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := inf.waitForObject(ctx, "c", "x", "99"); err != nil {
		t.Errorf("waitForObject in namespace c, outside the scope = %v, want nil at once", err)
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
	eventually(t, "the cache to start", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.ctx != nil })
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

// Issue 25, item 7: ResyncFor sets one type's resync, jittered, and
// replaces the Cache's default for it.
func TestResyncFor_SetsOneTypesPeriodWithJitter(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{Cache: CacheOptions{Resync: time.Hour}})
	if err := ResyncFor[corev1.ConfigMap](mgr.Cache(), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := ResyncFor[corev1.Secret](mgr.Cache(), 0); err != nil {
		t.Fatal(err)
	}
	secrets, err := InformerFor[corev1.Secret](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	if secrets.resync != nil {
		t.Errorf("Secrets resync, want never (ResyncFor 0)")
	}
	pods, err := InformerFor[corev1.Pod](mgr.Cache())
	if err != nil {
		t.Fatal(err)
	}
	if pods.resync == nil { // its period: TestResyncBy_GivesEachTypeItsPeriod
		t.Errorf("Pods never resync, want the default hour")
	}
	var resyncs atomic.Int32
	NewController(mgr, "resync", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		if tr, _ := TriggerFrom(ctx); tr.Cause == "resync" {
			resyncs.Add(1)
		}
		return Result{}, nil
	})
	cms := ClientFor[corev1.ConfigMap](mgr)
	startManager(t, mgr)
	if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "two resyncs of the ConfigMap", func() bool { return resyncs.Load() >= 2 })
}
