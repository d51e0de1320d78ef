package kctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/apitype"
	"github.com/kctl-dev/kctl/internal/discovery"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
)

// fakeServer serves handler over HTTP and returns a Conn to it. It answers
// the discovery documents of declared types itself (fakeDiscovery).
func fakeServer(t *testing.T, handler http.HandlerFunc) *Conn {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !fakeDiscovery(w, r) && !fakeRefusesWatchList(w, r) {
			handler(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	conn, err := NewConn(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// fakeRefusesWatchList answers a request for the watch-list stream as a
// server without the WatchList feature does (422), and reports whether r
// was one: the fakes script the faults of a paged list and a watch.
func fakeRefusesWatchList(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Query().Get("sendInitialEvents") != "true" {
		return false
	}
	c := fakeCall{w: w, r: r}
	c.status(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		"ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: "+
			"sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled")
	return true
}

func clientTestConn(t *testing.T, cfg *rest.Config) *Conn {
	t.Helper()
	conn, err := NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestClient_UserAgentAndSelectors_AreSent(t *testing.T) {
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if ua := r.UserAgent(); !strings.HasPrefix(ua, "kctl/") || !strings.Contains(ua, "/amd64") && !strings.Contains(ua, "/arm64") {
			t.Errorf("User-Agent = %q, want kctl/<version> (os/arch)", ua)
		}
		if q := r.URL.Query(); q.Get("labelSelector") != "app=web" || q.Get("fieldSelector") != "spec.nodeName=n1" || q.Get("limit") != "500" {
			t.Errorf("query = %s", r.URL.RawQuery)
		}
		if r.Header.Get("Accept") != mediaProtobuf+", "+mediaJSON {
			t.Errorf("Accept = %q", r.Header.Get("Accept"))
		}
		w.Header().Set("Content-Type", mediaJSON)
		w.Write([]byte(`{"metadata":{},"items":[]}`))
	})
	_, err := NewClient[corev1.Pod](conn).List(t.Context(), ListOptions{Labels: labels.SelectorFromSet(labels.Set{"app": "web"}), Fields: "spec.nodeName=n1"})
	if err != nil {
		t.Fatal(err)
	}
}

func TestClient_MisuseWithoutAServer_IsAClearError(t *testing.T) {
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) { t.Errorf("unexpected request %s", r.URL) })
	if _, err := NewClient[undeclared](conn).Get(t.Context(), "ns", "x"); err == nil || !strings.Contains(err.Error(), "declare it with kctl.Declare") {
		t.Errorf("a client for an undeclared type: err = %v", err)
	}
	g := NewClient[gizmo](conn)
	if err := g.Patch(t.Context(), &gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}}, StrategicMergePatch, []byte(`{}`), PatchOptions{}); err == nil || !strings.Contains(err.Error(), "strategic merge patch works only for k8s.io/api types") {
		t.Errorf("strategic merge patch of a CRD: err = %v", err)
	}
	if err := g.Apply(t.Context(), &gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}}, PatchOptions{}); err == nil || !strings.Contains(err.Error(), "FieldManager") {
		t.Errorf("apply without a field manager: err = %v", err)
	}
	if _, err := g.Get(t.Context(), "", "x"); err == nil || !strings.Contains(err.Error(), "give a namespace") {
		t.Errorf("get of a namespaced object without namespace: err = %v", err)
	}
	if err := g.DeleteAllOf(t.Context(), ListOptions{}, DeleteOptions{}); err == nil {
		t.Error("DeleteAllOf of a namespaced resource without namespace: no error")
	}
	g.cached = offCache[gizmo]{}
	if _, err := g.Get(t.Context(), "ns", "x"); err == nil || !strings.Contains(err.Error(), "cache is off") {
		t.Errorf("a cached Get whose cache fails: err = %v", err)
	}
	if _, err := g.Uncached().Get(t.Context(), "", "x"); err == nil || strings.Contains(err.Error(), "cache") {
		t.Errorf("Uncached().Get: err = %v, want the namespace error, not the cache's", err)
	}
}

func TestClient_ProtobufWatch_AgainstTheServer_SeesEveryEventType(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	cms := NewClient[corev1.ConfigMap](clientTestConn(t, cfg))
	ctx := t.Context()
	first := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"}}
	if err := cms.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	w, err := cms.watch(ctx, ListOptions{Namespace: ns}, first.ResourceVersion, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !strings.HasPrefix(w.ContentType(), mediaProtobuf) {
		t.Error("the watch of a built-in type is not protobuf")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "watched"}, Data: map[string]string{"a": "1"}}
	if err := cms.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["a"] = "2"
	if err := cms.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, ns, "watched"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 3 {
		ev, err := w.Next()
		if err != nil {
			t.Fatalf("watch: %v after %v", err, got)
		}
		if ev.Err != nil {
			t.Fatalf("watch event: %v", ev.Err)
		}
		if ev.Type != "BOOKMARK" {
			got = append(got, ev.Type+" "+ev.Object.Name+" "+ev.Object.Data["a"])
		}
	}
	if want := "ADDED watched 1,MODIFIED watched 2,DELETED watched 2"; strings.Join(got, ",") != want {
		t.Errorf("watch events = %v, want %s", got, want)
	}
}

func TestClient_List_Paginates1200ConfigMapsInPagesOf500(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	cfg.QPS, cfg.Burst = 2000, 2000
	var mu sync.Mutex
	var lists []string
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet {
				mu.Lock()
				lists = append(lists, r.URL.Query().Get("limit")+" "+fmt.Sprint(r.URL.Query().Has("continue")))
				mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	})
	cms := NewClient[corev1.ConfigMap](clientTestConn(t, cfg))
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, 1200)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < 1200; i += 16 {
				errs <- cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%04d", i)}})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	items, err := cms.List(ctx, ListOptions{Namespace: ns})
	if err != nil || len(items) != 1200 {
		t.Fatalf("List = %d items, %v; want 1200", len(items), err)
	}
	names := map[string]bool{}
	for _, cm := range items {
		names[cm.Name] = true
	}
	if len(names) != 1200 {
		t.Errorf("List returned %d distinct names, want 1200", len(names))
	}
	if want := "500 false,500 true,500 true"; strings.Join(lists, ",") != want {
		t.Errorf("list requests (limit, continue) = %v, want %s", lists, want)
	}
	if err := cms.DeleteAllOf(ctx, ListOptions{Namespace: ns}, DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if items, err := cms.List(ctx, ListOptions{Namespace: ns}); err != nil || len(items) != 0 {
		t.Errorf("List after DeleteAllOf = %d items, %v", len(items), err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestClient_Unprivileged_IsForbiddenWithAClearError(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	cms := NewClient[corev1.ConfigMap](clientTestConn(t, testUnprivilegedConfig(t)))
	_, err := cms.List(t.Context(), ListOptions{Namespace: ns})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "kctl: list configmaps/v1 in namespace "+ns) ||
		!strings.Contains(err.Error(), "grant this identity RBAC permission to list configmaps") {
		t.Errorf("List as the unprivileged user: err = %v", err)
	}
	err = cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot create resource") {
		t.Errorf("Create as the unprivileged user: err = %v", err)
	}
}

type notInstalledGizmo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

var _ = Declare[notInstalledGizmo](Resource{Group: "absent.kctl.example.com", Version: "v1", Kind: "Gizmo", Namespaced: true})

func TestClient_CRDNotInstalled_IsErrNotInstalledNamingIt(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	c := NewClient[notInstalledGizmo](clientTestConn(t, cfg))
	want := "kctl: gizmos.absent.kctl.example.com/v1 is not installed on the API server: apply its CRD " +
		"(the server serves no group version absent.kctl.example.com/v1: check Group and Version in kctl.Declare[kctl.notInstalledGizmo])"
	_, err := c.List(t.Context(), ListOptions{})
	if !errors.Is(err, ErrNotInstalled) || err.Error() != want {
		t.Errorf("List: err = %v, want %q", err, want)
	}
	_, err = c.Get(t.Context(), "default", "x")
	if !errors.Is(err, ErrNotInstalled) {
		t.Errorf("Get: err = %v, want ErrNotInstalled", err)
	}
	if _, err := c.watch(t.Context(), ListOptions{}, "", time.Minute); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("watch: err = %v, want ErrNotInstalled", err)
	}
}

// offCache is a cache that fails every read.
type offCache[T any] struct{}

func (offCache[T]) get(context.Context, string, string) (*T, error) {
	return nil, errors.New("cache is off")
}

func (offCache[T]) list(context.Context, ListOptions) ([]*T, error) {
	return nil, errors.New("cache is off")
}

// go doc shows a method promoted from an unexported embedded core as the
// core declares it: Client's Get read "(c *Client) Get(...) (P, error)"
// while Client[T] embedded client[*T]. Each type named here must declare
// its exported methods itself, so that they read with T's own types.
// (Informer joins once its methods are its own.)
func TestClient_GoDoc_EveryMethodIsDeclaredOnClientWithT(t *testing.T) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	pkg, err := doc.NewFromFiles(fset, files, "github.com/kctl-dev/kctl")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"Client": true}
	for _, typ := range pkg.Types {
		if !want[typ.Name] {
			continue
		}
		delete(want, typ.Name)
		for _, m := range typ.Methods {
			if m.Level != 0 {
				t.Errorf("go doc shows %s.%s promoted from %s: "+
					"declare it on %s[T] so it names T's types",
					typ.Name, m.Name, m.Orig, typ.Name)
			}
		}
	}
	for name := range want {
		t.Errorf("no type %s in the package", name)
	}
}

func TestClient_FaultInjection_TruncatedProtobuf_IsAnError(t *testing.T) {
	pb, _ := podListBodies(3)
	pod := podProto(realisticPod(1))
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", mediaProtobuf)
		if r.URL.Path == "/api/v1/namespaces/shop/pods" {
			w.Write(pb[:len(pb)-7])
			return
		}
		w.Write(pod[:len(pod)/2])
	})
	pods := NewClient[corev1.Pod](conn)
	if _, err := pods.Get(t.Context(), "shop", "web"); err == nil {
		t.Error("Get of a truncated protobuf pod: no error")
	}
	if _, err := pods.List(t.Context(), ListOptions{Namespace: "shop"}); err == nil {
		t.Error("List of a truncated protobuf list: no error")
	}
}

// podPage is a protobuf page of pods as the API server sends it: each item
// is the raw protobuf of one pod (badPodProto for an undecodable one).
func podPage(rv, next string, items ...[]byte) []byte {
	meta, _ := (&metav1.ListMeta{ResourceVersion: rv, Continue: next}).Marshal()
	list := pbField(1, meta)
	for _, item := range items {
		list = append(list, pbField(2, item)...)
	}
	return envelope("PodList", list)
}

func rawPod(i int) []byte {
	b, err := realisticPod(i).Marshal()
	if err != nil {
		panic(err)
	}
	return b
}

func TestClient_FaultInjection_ListWithUndecodableObjects_ReturnsTheOthersAndAnErrorNamingThem(t *testing.T) {
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/gizmos") {
			w.Header().Set("Content-Type", mediaJSON)
			w.Write([]byte(`{"metadata":{},"items":[{"metadata":{"name":"a","namespace":"shop"}},` +
				`{"metadata":{"name":"bad","namespace":"shop"},"spec":{"tags":"not-a-list"}}]}`))
			return
		}
		w.Header().Set("Content-Type", mediaProtobuf)
		if r.URL.Query().Get("continue") == "" { // two pages, a bad pod in each
			w.Write(podPage("9", "p2", rawPod(0), badPodProto("shop", "broken-1"), rawPod(1)))
		} else {
			w.Write(podPage("9", "", badPodProto("shop", "broken-2"), rawPod(2)))
		}
	})
	pods, err := NewClient[corev1.Pod](conn).List(t.Context(), ListOptions{Namespace: "shop"})
	if len(pods) != 3 || pods[2].Name != realisticPod(2).Name || pods[2].Kind != "Pod" {
		t.Errorf("List of pods = %d items; want the 3 good ones", len(pods))
	}
	if err == nil || !strings.Contains(err.Error(), "left out 2 object(s)") ||
		!strings.Contains(err.Error(), "shop/broken-1") || !strings.Contains(err.Error(), "shop/broken-2") {
		t.Errorf("List of pods: err = %v, want one naming shop/broken-1 and shop/broken-2", err)
	}
	gizmos, err := NewClient[gizmo](conn).List(t.Context(), ListOptions{Namespace: "shop"})
	if len(gizmos) != 1 || gizmos[0].Name != "a" || err == nil || !strings.Contains(err.Error(), "shop/bad") {
		t.Errorf("List of gizmos = %d items, %v; want gizmo a and an error naming shop/bad", len(gizmos), err)
	}
}

func TestClient_FaultInjection_GarbageJSON_IsAnError(t *testing.T) {
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte("<html>proxy error</html>"))
			return
		}
		w.Header().Set("Content-Type", mediaJSON)
		w.Write([]byte(`{"kind":"GizmoList","items":[{"metadata":{"name":"a"}},{"metad`))
	})
	g := NewClient[gizmo](conn)
	if _, err := g.List(t.Context(), ListOptions{}); err == nil {
		t.Error("List of garbage JSON: no error")
	}
	if _, err := g.Get(t.Context(), "ns", "a"); err == nil {
		t.Error("Get of garbage JSON: no error")
	}
	err := g.Update(t.Context(), &gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusBadGateway || !strings.Contains(err.Error(), "proxy error") {
		t.Errorf("Update answered 502 with HTML: err = %v, want a StatusError with code 502 quoting the body", err)
	}
}

func TestClient_FaultInjection_TruncatedWatchFrame_EndsTheWatchWithAnError(t *testing.T) {
	frame := watchFrame("ADDED", podProto(realisticPod(1)))
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" || r.URL.Query().Get("allowWatchBookmarks") != "true" || r.URL.Query().Get("timeoutSeconds") != "30" {
			t.Errorf("watch query = %s", r.URL.RawQuery)
		}
		w.Header().Set("Content-Type", mediaProtobuf+";stream=watch")
		w.Write(frame)
		w.Write(frame[:len(frame)-3])
	})
	w, err := NewClient[corev1.Pod](conn).watch(t.Context(), ListOptions{Namespace: "shop"}, "5", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	evs, err := readEvents(w)
	if len(evs) != 1 || evs[0].Object == nil || err == nil || err == io.EOF {
		t.Errorf("got %d events and %v; want 1 event and a truncation error", len(evs), err)
	}
}

func TestClient_FaultInjection_NotFoundWithoutDetails_IsErrNotInstalled(t *testing.T) {
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/missing") {
			w.Header().Set("Content-Type", mediaJSON)
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"details":{"name":"missing","group":"kctl.example.com","kind":"gizmos"}}`))
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte("404 page not found"))
	})
	g := NewClient[gizmo](conn)
	_, err := g.Get(t.Context(), "ns", "missing")
	if !apierrors.IsNotFound(err) || errors.Is(err, ErrNotInstalled) {
		t.Errorf("a missing object: err = %v, want NotFound and not ErrNotInstalled", err)
	}
	_, err = g.List(t.Context(), ListOptions{})
	want := "kctl: gizmos.kctl.example.com/v1 is not installed on the API server: apply its CRD"
	if !errors.Is(err, ErrNotInstalled) || err.Error() != want {
		t.Errorf("a 404 page: err = %v, want %q matching ErrNotInstalled", err, want)
	}
}

func TestClient_FaultInjection_ExpiredContinueToken_RestartsTheList(t *testing.T) {
	var mu sync.Mutex
	expired := 1
	firstPages := 0 // requests of the first page: one per start
	conn := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", mediaJSON)
		switch r.URL.Query().Get("continue") {
		case "":
			firstPages++
			w.Write([]byte(`{"metadata":{"continue":"t1"},"items":[{"metadata":{"name":"a"}}]}`))
		case "t1":
			if expired > 0 {
				expired--
				w.WriteHeader(http.StatusGone)
				w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410,"message":"continue too old"}`))
				return
			}
			w.Write([]byte(`{"metadata":{},"items":[{"metadata":{"name":"b"}}]}`))
		}
	})
	items, err := NewClient[gizmo](conn).List(t.Context(), ListOptions{})
	if err != nil || len(items) != 2 || items[0].Name != "a" || items[1].Name != "b" {
		t.Errorf("List with an expired continue token = %d items, %v; want a and b once each", len(items), err)
	}
	mu.Lock()
	if firstPages != 2 {
		t.Errorf("List with one expired continue token asked for the first page %d times, want 2", firstPages)
	}
	expired = 100
	firstPages = 0
	mu.Unlock()
	if _, err := NewClient[gizmo](conn).List(t.Context(), ListOptions{}); !apierrors.IsResourceExpired(err) {
		t.Errorf("List whose token always expires: err = %v, want ResourceExpired after %d restarts", err, listMaxRestarts)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstPages != listMaxRestarts+1 {
		t.Errorf("List whose token always expires asked for the first page %d times, want %d: once, then once per restart",
			firstPages, listMaxRestarts+1)
	}
}

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

// Integration tests of a Client's further verbs (client_more.go) against
// the local control plane.

func testDeployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}},
	}
}

func TestClient_Deployment_StatusEveryPatchKindAndApply(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	deps := NewClient[appsv1.Deployment](clientTestConn(t, cfg))
	ctx := t.Context()
	d := testDeployment(ns, "web")
	if err := deps.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	d.Status.ObservedGeneration = d.Generation
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "Test"}}
	if err := deps.UpdateStatus(ctx, d); err != nil || len(d.Status.Conditions) != 1 {
		t.Fatalf("UpdateStatus: %v, conditions %v", err, d.Status.Conditions)
	}
	containers := func(d *appsv1.Deployment) (names []string) {
		for _, c := range d.Spec.Template.Spec.Containers {
			names = append(names, c.Name)
		}
		return names
	}
	side := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.36"}]}}}}`)
	got := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	err := deps.Patch(ctx, got, StrategicMergePatch, side, PatchOptions{})
	if err != nil || len(containers(got)) != 2 {
		t.Errorf("strategic merge patch adding a container: %v, containers %v; want web and sidecar", err, containers(got))
	}
	err = deps.Patch(ctx, got, MergePatch, side, PatchOptions{})
	if err != nil || len(containers(got)) != 1 || containers(got)[0] != "sidecar" {
		t.Errorf("merge patch of the containers: %v, containers %v; want sidecar alone (lists are replaced)", err, containers(got))
	}
	err = deps.Patch(ctx, got, JSONPatch, []byte(`[{"op":"replace","path":"/spec/replicas","value":3}]`), PatchOptions{})
	if err != nil || *got.Spec.Replicas != 3 {
		t.Errorf("JSON patch of replicas: %v, %v", err, got)
	}
	err = deps.Patch(ctx, got, MergePatch, []byte(`{"status":{"observedGeneration":42}}`), PatchOptions{Subresource: "status"})
	if err != nil || got.Status.ObservedGeneration != 42 {
		t.Errorf("merge patch of the status subresource: %v, %+v", err, got.Status)
	}
	applied := testDeployment(ns, "applied")
	if err := deps.Apply(ctx, applied, PatchOptions{FieldManager: "kctl-test"}); err != nil || applied.UID == "" {
		t.Fatalf("Apply of a typed Deployment: %v", err)
	}
	other := testDeployment(ns, "applied")
	other.Spec.Replicas = new(int32(5))
	if err := deps.Apply(ctx, other, PatchOptions{FieldManager: "someone-else"}); !apierrors.IsConflict(err) {
		t.Errorf("Apply of a field another manager owns: err = %v, want Conflict", err)
	}
	if err := deps.Apply(ctx, other, PatchOptions{FieldManager: "someone-else", Force: true}); err != nil || *other.Spec.Replicas != 5 {
		t.Errorf("forced Apply: %v, replicas %v", err, other.Spec.Replicas)
	}
}

// configMapApply is shaped as client-go's generated apply configurations
// are (every field a pointer or a map with omitempty, TypeMeta inline):
// importing those would add modules to go.mod.
type configMapApply struct {
	Kind       *string           `json:"kind,omitempty"`
	APIVersion *string           `json:"apiVersion,omitempty"`
	Metadata   *objectMetaApply  `json:"metadata,omitempty"`
	Data       map[string]string `json:"data,omitempty"`
}

type objectMetaApply struct {
	Name      *string `json:"name,omitempty"`
	Namespace *string `json:"namespace,omitempty"`
}

func applyOf(kind, name, ns string, data map[string]string) *configMapApply {
	v1 := "v1"
	return &configMapApply{Kind: &kind, APIVersion: &v1, Metadata: &objectMetaApply{Name: &name, Namespace: &ns}, Data: data}
}

// Issue 25, item 8: ApplyConfig sends only the fields an apply
// configuration sets.
func TestClient_ApplyConfig_SendsOnlyTheFieldsItSets(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	cms := NewClient[corev1.ConfigMap](mustConn(t, cfg))
	ctx := t.Context()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a", Labels: map[string]string{"keep": "me"}},
		Data: map[string]string{"theirs": "1"}}
	if err := cms.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	ac := applyOf("ConfigMap", "a", ns, map[string]string{"mine": "2"})
	got, err := cms.ApplyConfig(ctx, ac, PatchOptions{FieldManager: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["theirs"] != "1" || got.Data["mine"] != "2" || got.Labels["keep"] != "me" {
		t.Errorf("after ApplyConfig: data %v labels %v, want theirs=1 mine=2 and the label kept", got.Data, got.Labels)
	}
	// Any value that marshals to the object's JSON; apiVersion and kind from T.
	plain := map[string]any{"metadata": map[string]any{"name": "a", "namespace": ns}, "data": map[string]string{"mine": "3"}}
	got, err = cms.ApplyConfig(ctx, plain, PatchOptions{FieldManager: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["mine"] != "3" || got.Data["theirs"] != "1" {
		t.Errorf("after the second ApplyConfig: data %v, want theirs=1 mine=3", got.Data)
	}
	wrong := applyOf("Secret", "a", ns, nil)
	_, err = cms.ApplyConfig(ctx, wrong, PatchOptions{FieldManager: "mine"})
	if err == nil || !strings.Contains(err.Error(), "of v1 Secret") {
		t.Errorf("ApplyConfig of a Secret's configuration = %v, want its kind named", err)
	}
	_, err = cms.ApplyConfig(ctx, applyOf("ConfigMap", "a", ns, nil), PatchOptions{})
	if err == nil || !strings.Contains(err.Error(), "FieldManager") {
		t.Errorf("ApplyConfig without a FieldManager = %v, want it asked for", err)
	}
}

func TestClient_DeleteWithOptions_PreconditionsAndPropagation(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	cms := NewClient[corev1.ConfigMap](clientTestConn(t, cfg))
	ctx := t.Context()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}}
	if err := cms.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := cms.DeleteWithOptions(ctx, ns, "c", DeleteOptions{UID: "not-the-uid"}); !apierrors.IsConflict(err) {
		t.Errorf("delete with a wrong UID precondition: err = %v, want Conflict", err)
	}
	if err := cms.DeleteWithOptions(ctx, ns, "c", DeleteOptions{ResourceVersion: "1"}); !apierrors.IsConflict(err) {
		t.Errorf("delete with a stale resourceVersion precondition: err = %v, want Conflict", err)
	}
	opts := DeleteOptions{UID: cm.UID, ResourceVersion: cm.ResourceVersion, Propagation: metav1.DeletePropagationForeground, GracePeriodSeconds: new(int64(0))}
	if err := cms.DeleteWithOptions(ctx, ns, "c", opts); err != nil {
		t.Errorf("delete with matching preconditions: %v", err)
	}
}
