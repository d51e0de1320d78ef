package kctl

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kctl-dev/kctl/internal/apitype"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestResourceOf_BuiltinTypes_AreDerivedFromPackageAndName(t *testing.T) {
	for _, tc := range []struct {
		got  func() (Resource, error)
		want Resource
	}{
		{ResourceOf[corev1.Pod], Resource{"", "v1", "Pod", "pods", true}},
		{ResourceOf[corev1.Endpoints], Resource{"", "v1", "Endpoints", "endpoints", true}},
		{ResourceOf[corev1.Namespace], Resource{"", "v1", "Namespace", "namespaces", false}},
		{ResourceOf[appsv1.Deployment], Resource{"apps", "v1", "Deployment", "deployments", true}},
		{ResourceOf[rbacv1.ClusterRole], Resource{"rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false}},
		{ResourceOf[networkingv1.NetworkPolicy], Resource{"networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", true}},
		{ResourceOf[networkingv1.Ingress], Resource{"networking.k8s.io", "v1", "Ingress", "ingresses", true}},
		{ResourceOf[storagev1.StorageClass], Resource{"storage.k8s.io", "v1", "StorageClass", "storageclasses", false}},
	} {
		got, err := tc.got()
		if err != nil || got != tc.want {
			t.Errorf("ResourceOf = %+v, %v; want %+v", got, err, tc.want)
		}
	}
	r, _ := ResourceOf[appsv1.Deployment]()
	if r.APIVersion() != "apps/v1" || r.String() != "deployments.apps/v1" {
		t.Errorf("APIVersion, String = %q, %q; want apps/v1, deployments.apps/v1", r.APIVersion(), r.String())
	}
	if r, _ := ResourceOf[corev1.Pod](); r.APIVersion() != "v1" || r.String() != "pods/v1" {
		t.Errorf("core APIVersion, String = %q, %q; want v1, pods/v1", r.APIVersion(), r.String())
	}
}

type undeclared struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func TestResourceOf_UnknownType_SaysDeclareIt(t *testing.T) {
	_, err := ResourceOf[undeclared]()
	want := "kctl: no API resource known for Go type kctl.undeclared: declare it with kctl.Declare"
	if err == nil || err.Error() != want {
		t.Errorf("ResourceOf[undeclared]() error = %v, want %q", err, want)
	}
	if _, err := ResourceOf[corev1.PodSpec](); err == nil {
		t.Error("ResourceOf[corev1.PodSpec]() succeeded; want an error: a PodSpec is not an object")
	}
}

type twiceDeclared struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

type conflicting struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

type invalidDeclared struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func TestDeclare_SameTwice_IsHarmless_AndPluralDefaults(t *testing.T) {
	r := Resource{Group: "example.com", Version: "v1", Kind: "Policy", Namespaced: true}
	got := Declare[twiceDeclared](r)
	Declare[twiceDeclared](got)
	if got.Plural != "policies" {
		t.Errorf("Declare filled Plural = %q, want policies", got.Plural)
	}
	if res, err := ResourceOf[twiceDeclared](); err != nil || res != got {
		t.Errorf("ResourceOf = %+v, %v; want %+v", res, err, got)
	}
}

func TestDeclare_ConflictingOrInvalid_ResourceOfReportsIt(t *testing.T) {
	Declare[conflicting](Resource{Group: "a.example.com", Version: "v1", Kind: "Thing", Plural: "things"})
	Declare[conflicting](Resource{Group: "b.example.com", Version: "v1", Kind: "Thing", Plural: "things"})
	if _, err := ResourceOf[conflicting](); err == nil || !strings.Contains(err.Error(), "declared twice") {
		t.Errorf("ResourceOf after two different declarations: err = %v, want 'declared twice'", err)
	}
	Declare[invalidDeclared](Resource{Group: "a.example.com", Kind: "Thing"})
	if _, err := ResourceOf[invalidDeclared](); err == nil || !strings.Contains(err.Error(), "needs at least Version and Kind") {
		t.Errorf("ResourceOf after a declaration without Version: err = %v", err)
	}
}

type racyDeclared struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func TestDeclare_ConcurrentWithResourceOf_IsRaceFree(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			Declare[racyDeclared](Resource{Group: "example.com", Version: "v1", Kind: "Racy", Plural: "racies"})
			_, _ = ResourceOf[racyDeclared]()
			_, _ = ResourceOf[corev1.Pod]()
		})
	}
	wg.Wait()
	if _, err := ResourceOf[racyDeclared](); err != nil {
		t.Error(err)
	}
}

func TestPluralOf_Rules(t *testing.T) {
	for kind, want := range map[string]string{
		"Pod": "pods", "Endpoints": "endpoints", "Ingress": "ingresses", "NetworkPolicy": "networkpolicies",
		"Gateway": "gateways", "Box": "boxes", "Patch": "patches", "Mesh": "meshes", "ComponentStatus": "componentstatuses",
		"Lease": "leases", "PriorityClass": "priorityclasses", "Quiz": "quizes", "": "",
	} {
		if got := apitype.Plural(kind); got != want {
			t.Errorf("Plural(%q) = %q, want %q", kind, got, want)
		}
	}
}

// apiModuleDir is the k8s.io/api module's source directory.
func apiModuleDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/api").Output()
	if err != nil {
		t.Fatalf("go list -m k8s.io/api: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// apiPackages returns the group/version package directories of k8s.io/api, e.g. "apps/v1".
func apiPackages(t *testing.T, root string) []string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(root, "*", "v*"))
	var out []string
	for _, d := range dirs {
		rel, _ := filepath.Rel(root, d)
		if !strings.HasPrefix(rel, "testdata") {
			out = append(out, filepath.ToSlash(rel))
		}
	}
	sort.Strings(out)
	return out
}

func TestResourceOf_GroupTable_MatchesRegisterGo(t *testing.T) {
	root := apiModuleDir(t)
	for _, pkg := range apiPackages(t, root) {
		src, err := os.ReadFile(filepath.Join(root, pkg, "register.go"))
		if err != nil {
			t.Errorf("%s: %v", pkg, err)
			continue
		}
		_, rest, ok := strings.Cut(string(src), "const GroupName = ")
		group, err := strconv.Unquote(strings.Fields(rest + " x")[0])
		if !ok || err != nil {
			t.Errorf("%s/register.go has no const GroupName", pkg)
			continue
		}
		if got, ok := apitype.Groups[strings.Split(pkg, "/")[0]]; !ok || got != group {
			t.Errorf("apitype.Groups[%q] = %q, %v; register.go says %q", strings.Split(pkg, "/")[0], got, ok, group)
		}
	}
}

// listedTypes returns, per k8s.io/api package ("apps/v1"), the type names X
// that have an XList type with Items.
func listedTypes(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, pkg := range apiPackages(t, root) {
		pkgs, err := parser.ParseDir(token.NewFileSet(), filepath.Join(root, pkg), func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parsing %s: %v", pkg, err)
		}
		types := map[string]bool{}
		var lists []string
		for _, p := range pkgs {
			ast.Inspect(p, func(n ast.Node) bool {
				ts, ok := n.(*ast.TypeSpec)
				if !ok {
					return true
				}
				types[ts.Name.Name] = true
				if st, ok := ts.Type.(*ast.StructType); ok && strings.HasSuffix(ts.Name.Name, "List") {
					for _, f := range st.Fields.List {
						if len(f.Names) == 1 && f.Names[0].Name == "Items" {
							lists = append(lists, strings.TrimSuffix(ts.Name.Name, "List"))
						}
					}
				}
				return false
			})
		}
		for _, name := range lists {
			if types[name] {
				out[pkg] = append(out[pkg], name)
			}
		}
	}
	return out
}

// TestResourceOf_EveryListedK8sAPIType_MatchesServerDiscovery checks kctl's
// derived Resource of every k8s.io/api type with a List type against the
// discovery documents of the local API server. Group versions the server
// does not serve (alpha and most beta APIs are off by default) are reported
// and skipped.
func TestResourceOf_EveryListedK8sAPIType_MatchesServerDiscovery(t *testing.T) {
	cfg := testConfig(t)
	root := apiModuleDir(t)
	checked, skipped := 0, []string{}
	for pkg, names := range listedTypes(t, root) {
		dir, version, _ := strings.Cut(pkg, "/")
		path := "/apis/" + apitype.Groups[dir] + "/" + version
		if dir == "core" {
			path = "/api/" + version
		}
		code, body := testRawRequest(t, cfg, "GET", path, "")
		if code == http.StatusNotFound {
			skipped = append(skipped, pkg+" ("+strings.Join(names, ", ")+")")
			continue
		}
		var doc metav1.APIResourceList
		if err := json.Unmarshal(body, &doc); code != http.StatusOK || err != nil {
			t.Fatalf("GET %s: %d %v %s", path, code, err, body)
		}
		served := map[string]metav1.APIResource{}
		for _, r := range doc.APIResources {
			if !strings.Contains(r.Name, "/") {
				served[r.Kind] = r
			}
		}
		for _, name := range names {
			got, ok := apitype.Derive("k8s.io/api/"+pkg, name)
			if !ok {
				t.Errorf("derive(k8s.io/api/%s, %s) knows nothing", pkg, name)
				continue
			}
			want, ok := served[name]
			if !ok {
				skipped = append(skipped, pkg+"."+name)
				continue
			}
			checked++
			if got.Kind != want.Kind || got.Plural != want.Name || got.Namespaced != want.Namespaced || got.APIVersion() != doc.GroupVersion {
				t.Errorf("kctl says %s.%s is %+v; the server says %s %s plural %s namespaced %v",
					pkg, name, got, doc.GroupVersion, want.Kind, want.Name, want.Namespaced)
			}
		}
	}
	sort.Strings(skipped)
	t.Logf("checked %d types against discovery; not served by this server, skipped: %s", checked, strings.Join(skipped, "; "))
	if checked < 40 {
		t.Errorf("only %d types checked; the server should serve at least the 40-odd GA types", checked)
	}
}

func TestDeepCopy_BuiltinAndDeclared_ShareNoMemory(t *testing.T) {
	p := realisticPod(1)
	c := opsOf[corev1.Pod]().deepCopy(p)
	c.Labels["app"] = "changed"
	c.Spec.Containers[0].Name = "changed"
	if p.Labels["app"] != "web" || p.Spec.Containers[0].Name != "web" {
		t.Error("deepCopy of a Pod shares memory with the original")
	}
	g := &gizmo{ObjectMeta: metav1.ObjectMeta{Name: "g", Labels: map[string]string{"a": "b"}}, Spec: gizmoSpec{Tags: []string{"x"}}}
	gizmos := opsOf[gizmo]()
	gc := gizmos.deepCopy(g)
	gc.Labels["a"], gc.Spec.Tags[0] = "changed", "changed"
	if g.Labels["a"] != "b" || g.Spec.Tags[0] != "x" || !reflect.DeepEqual(gizmos.deepCopy(g), g) {
		t.Error("deepCopy of a declared type shares memory or differs")
	}
	if gizmos.deepCopy(nil) != nil {
		t.Error("deepCopy(nil) != nil")
	}
}

func TestSetControllerReference_SetsOwnerFromItsType_AndRefusesASecondController(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-1"}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "uid-x"}}}}
	if err := SetControllerReference(dep, rs); err != nil {
		t.Fatal(err)
	}
	if err := SetControllerReference(dep, rs); err != nil { // again: updated in place, not added twice
		t.Fatal(err)
	}
	refs := rs.OwnerReferences
	if len(refs) != 2 || refs[1].APIVersion != "apps/v1" || refs[1].Kind != "Deployment" || refs[1].Name != "web" ||
		refs[1].UID != "uid-1" || !*refs[1].Controller || !*refs[1].BlockOwnerDeletion {
		t.Fatalf("owner references = %+v, want the ConfigMap's and a controller reference to Deployment web", refs)
	}
	other := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "shop", UID: "uid-2"}}
	if err := SetControllerReference(other, rs); err == nil || !strings.Contains(err.Error(), "already controlled by Deployment web") {
		t.Errorf("a second controller: err = %v, want 'already controlled by Deployment web'", err)
	}
	if err := SetControllerReference(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "shop"}}, &corev1.Pod{}); err == nil {
		t.Error("an owner without UID: no error")
	}
	elsewhere := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "other"}}
	if err := SetControllerReference(dep, elsewhere); err == nil {
		t.Error("an owner in another namespace: no error")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", UID: "uid-ns"}}
	if err := SetControllerReference(ns, elsewhere); err != nil || elsewhere.OwnerReferences[0].Kind != "Namespace" {
		t.Errorf("a cluster-scoped owner: err = %v, refs %+v", err, elsewhere.OwnerReferences)
	}
}

func TestRetryOnConflict_GivesUpAfterFiveTries_BackingOffInFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conflict := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "c", errors.New("stale"))
		tries, start := 0, time.Now()
		err := RetryOnConflict(t.Context(), func() error { tries++; return conflict })
		if !apierrors.IsConflict(err) || tries != 5 {
			t.Errorf("RetryOnConflict = %v after %d tries; want Conflict after 5", err, tries)
		}
		if d := time.Since(start); d < 150*time.Millisecond || d > 170*time.Millisecond {
			t.Errorf("backed off %v in all, want 10+20+40+80ms plus up to 10%% jitter", d)
		}
		tries = 0
		other := errors.New("not a conflict")
		if err := RetryOnConflict(t.Context(), func() error { tries++; return other }); err != other || tries != 1 {
			t.Errorf("RetryOnConflict of another error = %v after %d tries; want it at once", err, tries)
		}
	})
}

func TestCreateOrUpdate_And_CreateOrPatch_ReportWhatTheyDid(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	ctx := t.Context()
	cms := NewClient[corev1.ConfigMap](clientTestConn(t, cfg))
	setMode := func(mode string) func(*corev1.ConfigMap) error {
		return func(cm *corev1.ConfigMap) error { cm.Data = map[string]string{"mode": mode}; return nil }
	}
	for i, want := range []struct {
		mode string
		res  OperationResult
	}{{"a", OperationResultCreated}, {"a", OperationResultNone}, {"b", OperationResultUpdated}} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cou"}}
		res, err := CreateOrUpdate(ctx, cms, cm, setMode(want.mode))
		if err != nil || res != want.res || cm.Data["mode"] != want.mode || cm.UID == "" {
			t.Errorf("step %d: CreateOrUpdate(mode %s) = %s, %v, %v; want %s", i, want.mode, res, err, cm.Data, want.res)
		}
	}
	g := installGizmoCRD(t, cfg)
	steps := []struct {
		mutate func(*gizmo)
		res    OperationResult
	}{
		{func(x *gizmo) { x.Spec.Size = 1 }, OperationResultCreated},
		{func(x *gizmo) { x.Spec.Size = 1 }, OperationResultNone},
		{func(x *gizmo) { x.Spec.Color = "red" }, OperationResultUpdated},
		{func(x *gizmo) { x.Status.Ready = true }, OperationResultUpdatedStatusOnly},
		{func(x *gizmo) { x.Spec.Size, x.Status.Ready = 3, false }, OperationResultUpdatedStatus},
	}
	for i, s := range steps {
		obj := &gizmo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cop"}}
		res, err := CreateOrPatch(ctx, g, obj, func(x *gizmo) error { s.mutate(x); return nil })
		if err != nil || res != s.res {
			t.Errorf("step %d: CreateOrPatch = %s, %v; want %s", i, res, err, s.res)
		}
	}
	got, err := g.Get(ctx, ns, "cop")
	if err != nil || got.Spec.Size != 3 || got.Spec.Color != "red" || got.Status.Ready {
		t.Errorf("after CreateOrPatch: %+v, %v; want size 3, red, not ready", got, err)
	}
	_, err = CreateOrUpdate(ctx, cms, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cou"}}, func(cm *corev1.ConfigMap) error {
		cm.Name = "renamed"
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "must keep the name") {
		t.Errorf("a mutate that renames: err = %v", err)
	}
	var tries int
	err = RetryOnConflict(ctx, func() error {
		tries++
		cm, err := cms.Get(ctx, ns, "cou")
		if err != nil {
			return err
		}
		if tries == 1 {
			cm.ResourceVersion = "1" // stale: Conflict
		}
		cm.Data["mode"] = "retried"
		return cms.Update(ctx, cm)
	})
	if err != nil || tries != 2 {
		t.Errorf("RetryOnConflict = %v after %d tries; want success after 2", err, tries)
	}
}
