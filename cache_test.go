package kctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
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
