package kctl

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/apitype"
	"github.com/kctl-dev/kctl/internal/discovery"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// fakeDiscovery answers a fault-injection server's GET of a discovery
// document (/apis/<group>/<version>) of a group version with declared types,
// listing them as declared, each with a status subresource. It reports
// whether it answered.
func fakeDiscovery(w http.ResponseWriter, r *http.Request) bool {
	gv, ok := strings.CutPrefix(r.URL.Path, "/apis/")
	if !ok || r.Method != http.MethodGet || strings.Count(gv, "/") != 1 {
		return false
	}
	doc := metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv}
	for _, res := range apitype.Declared() {
		if res.APIVersion() == gv {
			doc.APIResources = append(doc.APIResources,
				metav1.APIResource{Name: res.Plural, Kind: res.Kind, Namespaced: res.Namespaced},
				metav1.APIResource{Name: res.Plural + "/status", Kind: res.Kind, Namespaced: res.Namespaced})
		}
	}
	if len(doc.APIResources) == 0 {
		return false
	}
	body, _ := json.Marshal(doc)
	w.Header().Set("Content-Type", mediaJSON)
	w.Write(body)
	return true
}

// A missing CRD read in a hot loop by many goroutines costs one discovery
// request per second, and no request for the resource itself.
func TestDiscovery_FaultInjection_MissingGroupVersion_IsAskedForOncePerSecond(t *testing.T) {
	var discoveries, others atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apis/absent.kctl.example.com/v1" {
			discoveries.Add(1)
		} else {
			others.Add(1)
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	conn, err := NewConn(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	conn.discovery.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	c := NewClient[notInstalledGizmo](conn)
	want := "kctl: gizmos.absent.kctl.example.com/v1 is not installed on the API server: apply its CRD " +
		"(the server serves no group version absent.kctl.example.com/v1: check Group and Version in kctl.Declare[kctl.notInstalledGizmo])"
	listAll := func(step string) {
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				_, err := c.List(t.Context(), ListOptions{Namespace: "shop"})
				if !errors.Is(err, ErrNotInstalled) || !apierrors.IsNotFound(err) || err.Error() != want {
					t.Errorf("%s: List = %v, want %q matching ErrNotInstalled and NotFound", step, err, want)
				}
			})
		}
		wg.Wait()
	}
	for _, step := range []struct {
		what        string
		advance     time.Duration
		discoveries int32
	}{
		{"first calls", 0, 1},
		{"999ms later", 999 * time.Millisecond, 1},
		{"a second after the first", time.Millisecond, 2},
		{"an hour later", time.Hour, 3},
	} {
		advance(step.advance)
		listAll(step.what)
		if n := discoveries.Load(); n != step.discoveries {
			t.Errorf("%s: %d discovery requests in all, want %d", step.what, n, step.discoveries)
		}
	}
	if n := others.Load(); n != 0 {
		t.Errorf("%d requests for the resource itself, want none: discovery said it is not served", n)
	}
}

// A discovery request cut short by its caller's context is not taken for
// the server's answer: the next check asks again.
func TestDiscovery_FaultInjection_RequestEndedByTheContext_RecordsNothing(t *testing.T) {
	var discoveries atomic.Int32
	asked := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apis/kctl.example.com/v1" && discoveries.Add(1) == 1 {
			close(asked)
			<-r.Context().Done() // hangs until the client gives up
			return
		}
		if !fakeDiscovery(w, r) {
			w.Header().Set("Content-Type", mediaJSON)
			w.Write([]byte(`{"kind":"GizmoList","apiVersion":"kctl.example.com/v1","metadata":{},"items":[]}`))
		}
	}))
	t.Cleanup(srv.Close)
	conn, err := NewConn(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	conn.discovery.Now = func() time.Time { return time.Unix(1000, 0) } // never a second later
	g := NewClient[gizmo](conn)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-asked; cancel() }()
	if _, err := g.List(ctx, ListOptions{Namespace: "shop"}); !errors.Is(err, context.Canceled) || errors.Is(err, ErrNotInstalled) {
		t.Errorf("List whose context ends during discovery: err = %v, want context.Canceled and not ErrNotInstalled", err)
	}
	if _, err := g.List(t.Context(), ListOptions{Namespace: "shop"}); err != nil {
		t.Errorf("List after that: %v", err)
	}
	if n := discoveries.Load(); n != 2 {
		t.Errorf("%d discovery requests, want 2", n)
	}
}

// Integration tests against the local control plane. Group discovery.kctl.dev
// serves dwidgets (namespaced, without a status subresource) and dclusters
// (cluster-scoped); the Go types below declare them rightly or wrongly.

const (
	dWidgetCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"dwidgets.discovery.kctl.dev"},
"spec":{"group":"discovery.kctl.dev","scope":"Namespaced","names":{"plural":"dwidgets","singular":"dwidget","kind":"DWidget","listKind":"DWidgetList"},
"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`
	dClusterCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"dclusters.discovery.kctl.dev"},
"spec":{"group":"discovery.kctl.dev","scope":"Cluster","names":{"plural":"dclusters","singular":"dcluster","kind":"DCluster","listKind":"DClusterList"},
"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`
)

type dWidget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              map[string]string `json:"spec,omitempty"`
	Status            map[string]string `json:"status,omitempty"`
}

type (
	dWidgetDeclaredClusterScoped dWidget
	dWidgetPluralTypo            dWidget
	dWidgetKindTypo              dWidget
	dWidgetGroupTypo             dWidget
	dClusterDeclaredNamespaced   dWidget
)

var (
	_ = Declare[dWidget](Resource{Group: "discovery.kctl.dev", Version: "v1", Kind: "DWidget", Namespaced: true})
	_ = Declare[dWidgetDeclaredClusterScoped](Resource{Group: "discovery.kctl.dev", Version: "v1", Kind: "DWidget"})
	_ = Declare[dWidgetPluralTypo](Resource{Group: "discovery.kctl.dev", Version: "v1", Kind: "DWidget", Plural: "dwidgetz", Namespaced: true})
	_ = Declare[dWidgetKindTypo](Resource{Group: "discovery.kctl.dev", Version: "v1", Kind: "DWidgit", Plural: "dwidgets", Namespaced: true})
	_ = Declare[dWidgetGroupTypo](Resource{Group: "discovery.kctl.dve", Version: "v1", Kind: "DWidget", Namespaced: true})
	_ = Declare[dClusterDeclaredNamespaced](Resource{Group: "discovery.kctl.dev", Version: "v1", Kind: "DCluster", Namespaced: true})
)

// installDiscoveryCRDs applies the dwidgets and dclusters CRDs and waits until discovery lists both.
func installDiscoveryCRDs(t *testing.T, cfg *rest.Config) {
	t.Helper()
	for _, crd := range []string{dWidgetCRD, dClusterCRD} {
		if code, body := testRawRequest(t, cfg, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd); code != http.StatusCreated && code != http.StatusConflict {
			t.Fatalf("creating a CRD: %d %s", code, body)
		}
	}
	discoveryEventually(t, "discovery to list dwidgets and dclusters", func() bool {
		code, body := testRawRequest(t, cfg, "GET", "/apis/discovery.kctl.dev/v1", "")
		return code == http.StatusOK && strings.Contains(string(body), `"dwidgets"`) && strings.Contains(string(body), `"dclusters"`)
	})
}

// discoveryEventually polls cond every 50ms until it holds, failing after 30s.
func discoveryEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// wantError fails the test unless err contains every part of want, matches
// ErrNotInstalled exactly when notInstalled and NotFound exactly when notFound.
func wantError(t *testing.T, call string, err error, notInstalled, notFound bool, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one saying %q", call, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: err = %v, want it to say %q", call, err, w)
		}
	}
	if errors.Is(err, ErrNotInstalled) != notInstalled || apierrors.IsNotFound(err) != notFound {
		t.Errorf("%s: err = %v matches ErrNotInstalled %v and NotFound %v, want %v and %v",
			call, err, errors.Is(err, ErrNotInstalled), apierrors.IsNotFound(err), notInstalled, notFound)
	}
	if strings.Count(err.Error(), "kctl:") != 1 {
		t.Errorf("%s: err = %v, want one kctl: prefix", call, err)
	}
}

// Issue 15, item 1: a CRD declared without Namespaced while the server
// serves it namespaced lost its namespace from the request path and was
// reported as not installed; a List of one namespace listed them all.
func TestDiscovery_DeclaredScopeDisagreesWithTheServer_IsAnErrorNamingTheFix(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	installDiscoveryCRDs(t, cfg)
	conn := clientTestConn(t, cfg)
	ctx := t.Context()

	asCluster := NewClient[dWidgetDeclaredClusterScoped](conn)
	obj := &dWidgetDeclaredClusterScoped{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}}
	fix := "discovery.kctl.dev/v1 serves dwidgets namespaced, but kctl.Declare[kctl.dWidgetDeclaredClusterScoped] declares them cluster-scoped: add Namespaced: true to it"
	wantError(t, "Create", asCluster.Create(ctx, obj), false, false, fix)
	_, err := asCluster.List(ctx, ListOptions{Namespace: ns})
	wantError(t, "List of one namespace", err, false, false, fix)
	_, err = asCluster.Get(ctx, ns, "w")
	wantError(t, "Get", err, false, false, fix)

	asNamespaced := NewClient[dClusterDeclaredNamespaced](conn)
	_, err = asNamespaced.List(ctx, ListOptions{Namespace: ns})
	wantError(t, "List of a cluster-scoped resource declared namespaced", err, false, false,
		"discovery.kctl.dev/v1 serves dclusters cluster-scoped, but kctl.Declare[kctl.dClusterDeclaredNamespaced] declares them namespaced: remove Namespaced: true from it")

	right := NewClient[dWidget](conn)
	if err := right.Create(ctx, &dWidget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}}); err != nil {
		t.Errorf("Create as declared rightly: %v", err)
	}
	if items, err := right.List(ctx, ListOptions{Namespace: ns}); err != nil || len(items) != 1 {
		t.Errorf("List as declared rightly = %d items, %v; want 1", len(items), err)
	}
}

// Issue 15, item 1: a typo in a declaration was reported as "not installed".
func TestDiscovery_PluralKindOrGroupTypo_ListsWhatTheServerServes(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	installDiscoveryCRDs(t, cfg)
	conn := clientTestConn(t, cfg)
	ctx := t.Context()

	_, err := NewClient[dWidgetPluralTypo](conn).List(ctx, ListOptions{Namespace: ns})
	wantError(t, "List with a plural typo", err, true, true, "kctl: dwidgetz.discovery.kctl.dev/v1 is not installed on the API server",
		"discovery.kctl.dev/v1 serves dclusters (kind DCluster), dwidgets (kind DWidget): correct Plural or Kind in kctl.Declare[kctl.dWidgetPluralTypo]")

	_, err = NewClient[dWidgetGroupTypo](conn).Get(ctx, ns, "w")
	wantError(t, "Get with a group typo", err, true, true, "kctl: dwidgets.discovery.kctl.dve/v1 is not installed on the API server",
		"the server serves no group version discovery.kctl.dve/v1: check Group and Version in kctl.Declare[kctl.dWidgetGroupTypo]")

	_, err = NewClient[dWidgetKindTypo](conn).List(ctx, ListOptions{Namespace: ns})
	wantError(t, "List with a kind typo", err, false, false,
		"kctl: discovery.kctl.dev/v1 serves dwidgets as kind DWidget, not DWidgit: correct Kind in kctl.Declare[kctl.dWidgetKindTypo]")
}

// Issue 15, item 5: UpdateStatus of a CRD without the status subresource
// failed with a bare NotFound, which reconcilers commonly ignore.
func TestClient_UpdateStatusWithoutTheStatusSubresource_SaysHowToFixIt(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	installDiscoveryCRDs(t, cfg)
	ctx := t.Context()
	c := NewClient[dWidget](clientTestConn(t, cfg))
	obj := &dWidget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}, Spec: map[string]string{"a": "b"}}
	if err := c.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	obj.Status = map[string]string{"phase": "ready"}
	err := c.UpdateStatus(ctx, obj)
	fix := "the server serves no status subresource of dwidgets: add `subresources: {status: {}}` to version v1 of their CRD"
	wantError(t, "UpdateStatus", err, true, false, "kctl: update status of dwidgets.discovery.kctl.dev/v1 "+ns+"/w: "+fix)
	err = c.Patch(ctx, &dWidget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}}, MergePatch, []byte(`{"status":{"phase":"ready"}}`), PatchOptions{Subresource: "status"})
	wantError(t, "Patch of the status", err, true, false, fix)

	cms := NewClient[corev1.ConfigMap](clientTestConn(t, cfg))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}}
	if err := cms.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	wantError(t, "UpdateStatus of a ConfigMap", cms.UpdateStatus(ctx, cm), true, false,
		"kctl: update status of configmaps/v1 "+ns+"/c: the server serves no status subresource of configmaps: write the whole object instead")
	pods := NewClient[corev1.Pod](clientTestConn(t, cfg))
	err = pods.UpdateStatus(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "missing"}})
	if !apierrors.IsNotFound(err) || errors.Is(err, ErrNotInstalled) {
		t.Errorf("UpdateStatus of a missing Pod (which has a status subresource): err = %v, want NotFound", err)
	}
}

// ffWidget's CRD is applied in the middle of its test.
type ffWidget dWidget

var _ = Declare[ffWidget](Resource{Group: "failfast.discovery.kctl.dev", Version: "v1", Kind: "FFWidget", Namespaced: true})

const ffWidgetCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"ffwidgets.failfast.discovery.kctl.dev"},
"spec":{"group":"failfast.discovery.kctl.dev","scope":"Namespaced","names":{"plural":"ffwidgets","singular":"ffwidget","kind":"FFWidget","listKind":"FFWidgetList"},
"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

// Issue 15, item 10: a cached read of a type whose CRD is not installed
// waited until its context ended.
func TestClientFor_CRDNotInstalled_CachedReadsFailAtOnceThenWorkOnceItIsApplied(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	const crdPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/ffwidgets.failfast.discovery.kctl.dev"
	const gvPath = "/apis/failfast.discovery.kctl.dev/v1"
	testRawRequest(t, cfg, "DELETE", crdPath, "") // from an earlier run
	discoveryEventually(t, "the CRD to be gone", func() bool {
		crd, _ := testRawRequest(t, cfg, "GET", crdPath, "")
		gv, _ := testRawRequest(t, cfg, "GET", gvPath, "")
		return crd == http.StatusNotFound && gv == http.StatusNotFound
	})
	var discoveries atomic.Int32
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == gvPath {
				discoveries.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	m := testManager(t, cfg, ns, Options{})
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	m.conn.discovery.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := ClientFor[ffWidget](m)
	startManager(t, m)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.Get(ctx, ns, "w")
	t.Logf("the cached Get of a type whose CRD is not installed failed after %v", time.Since(start).Round(time.Millisecond))
	if ctx.Err() != nil {
		t.Fatalf("cached Get of a type whose CRD is not installed waited until its context ended: %v", err)
	}
	wantError(t, "cached Get", err, true, true, "kctl: ffwidgets.failfast.discovery.kctl.dev/v1 is not installed on the API server: apply its CRD")
	_, err = c.List(ctx, ListOptions{Namespace: ns})
	wantError(t, "cached List", err, true, true, "is not installed")
	if n := discoveries.Load(); n != 1 {
		t.Errorf("%d discovery requests for %s, want 1", n, gvPath)
	}

	if code, body := testRawRequest(t, cfg, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", ffWidgetCRD); code != http.StatusCreated {
		t.Fatalf("creating the CRD: %d %s", code, body)
	}
	discoveryEventually(t, "discovery to list ffwidgets", func() bool {
		code, _ := testRawRequest(t, cfg, "GET", gvPath, "")
		return code == http.StatusOK
	})
	mu.Lock()
	now = now.Add(discovery.Refresh)
	mu.Unlock()
	ctx, cancel = context.WithTimeout(t.Context(), 30*time.Second) // the informer polls a missing CRD every 10s at most
	defer cancel()
	_, err = c.Get(ctx, ns, "w")
	if !apierrors.IsNotFound(err) || errors.Is(err, ErrNotInstalled) {
		t.Errorf("cached Get once the CRD is applied: err = %v, want NotFound (from the synced cache)", err)
	}
}
