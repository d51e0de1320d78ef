package kctl

import (
	"context"
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
	"testing"
	"time"

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
	if !strings.HasPrefix(w.ct, mediaProtobuf) {
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
