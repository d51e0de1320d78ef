package apitype_test

import (
	"reflect"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kctl-dev/kctl/internal/apitype"
)

// The registry is global to this test binary, so every test that declares
// uses its own local types, and no test declares a k8s.io/api type.
type (
	defaultsPluralWidget struct{ object }
	explicitPluralWidget struct{ object }
	sameTwiceWidget      struct{ object }
	conflictWidget       struct{ object }
	noVersionWidget      struct{ object }
	noKindWidget         struct{ object }
	undeclaredWidget     struct{ object }
	agreeWidget          struct{ object }
	agreeConflictWidget  struct{ object }
	listedWidget         struct{ object }
	listedGadget         struct{ object }
	unlistedWidget       struct{ object }
	concurrentWidget     struct{ object }
)

// object makes a local struct a metav1.Object, like a custom resource.
type object struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func TestPlural_FollowsTheKindRules(t *testing.T) {
	tests := []struct{ kind, want string }{
		{"Pod", "pods"},
		{"ConfigMap", "configmaps"},
		{"EndpointSlice", "endpointslices"},
		// consonant + "y" -> "ies"; vowel + "y" keeps the "y".
		{"NetworkPolicy", "networkpolicies"},
		{"Policy", "policies"},
		{"Key", "keys"},
		{"Gateway", "gateways"},
		{"Toy", "toys"},
		{"Y", "ys"},
		// "s", "x", "z", "ch", "sh" -> +"es".
		{"Ingress", "ingresses"},
		{"Status", "statuses"},
		{"Box", "boxes"},
		{"Quiz", "quizes"},
		{"Batch", "batches"},
		{"Mesh", "meshes"},
		// "h" alone is not "ch" or "sh".
		{"Month", "months"},
		// endpoints is already plural.
		{"Endpoints", "endpoints"},
		{"endpoints", "endpoints"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := apitype.Plural(tt.kind); got != tt.want {
			t.Errorf("Plural(%q) = %q, want %q", tt.kind, got, tt.want)
		}
	}
}

func TestDerive_K8sIOAPITypes_GiveGroupVersionKindAndScope(t *testing.T) {
	tests := []struct {
		typ  reflect.Type
		want apitype.Resource
	}{
		{reflect.TypeFor[corev1.Pod](),
			res("", "v1", "Pod", "pods", true)},
		{reflect.TypeFor[corev1.Endpoints](),
			res("", "v1", "Endpoints", "endpoints", true)},
		{reflect.TypeFor[corev1.Namespace](),
			res("", "v1", "Namespace", "namespaces", false)},
		{reflect.TypeFor[corev1.Node](),
			res("", "v1", "Node", "nodes", false)},
		{reflect.TypeFor[corev1.PersistentVolume](),
			res("", "v1", "PersistentVolume", "persistentvolumes", false)},
		{reflect.TypeFor[appsv1.Deployment](),
			res("apps", "v1", "Deployment", "deployments", true)},
		{reflect.TypeFor[batchv1.Job](),
			res("batch", "v1", "Job", "jobs", true)},
		{reflect.TypeFor[networkingv1.NetworkPolicy](),
			res("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", true)},
		{reflect.TypeFor[networkingv1.IngressClass](),
			res("networking.k8s.io", "v1", "IngressClass", "ingressclasses", false)},
		{reflect.TypeFor[rbacv1.Role](),
			res("rbac.authorization.k8s.io", "v1", "Role", "roles", true)},
		{reflect.TypeFor[rbacv1.ClusterRole](),
			res("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false)},
		{reflect.TypeFor[rbacv1.ClusterRoleBinding](),
			res("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false)},
	}
	for _, tt := range tests {
		pkg, name := tt.typ.PkgPath(), tt.typ.Name()
		got, ok := apitype.Derive(pkg, name)
		if !ok || got != tt.want {
			t.Errorf("Derive(%q, %q) = %+v, %v, want %+v, true", pkg, name, got, ok, tt.want)
		}
	}
}

func TestDerive_OtherPaths_AreNotOK(t *testing.T) {
	tests := []struct{ pkg, name string }{
		{"example.com/api/v1", "Widget"},
		{"k8s.io/apimachinery/pkg/apis/meta/v1", "Status"},
		{"github.com/x/k8s.io/api/apps/v1", "Deployment"},
		{"k8s.io/apis/apps/v1", "Deployment"},
		{"k8s.io/api", "Deployment"},
		{"k8s.io/api/", "Deployment"},
		{"k8s.io/api/apps", "Deployment"},
		{"k8s.io/api/apps/", "Deployment"},
		{"k8s.io/api/apps/v1/nested", "Deployment"},
		{"k8s.io/api/apps/v1/", "Deployment"},
		{"k8s.io/api/nosuchgroup/v1", "Thing"},
		{"k8s.io/api/apps/v1", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got, ok := apitype.Derive(tt.pkg, tt.name); ok {
			t.Errorf("Derive(%q, %q) = %+v, true, want false", tt.pkg, tt.name, got)
		}
	}
}

func TestResource_APIVersionAndString_OmitTheCoreGroup(t *testing.T) {
	tests := []struct {
		r               apitype.Resource
		apiVersion, str string
	}{
		{apitype.Resource{Version: "v1", Kind: "Pod", Plural: "pods"}, "v1", "pods/v1"},
		{apitype.Resource{Group: "apps", Version: "v1", Kind: "ReplicaSet", Plural: "replicasets"},
			"apps/v1", "replicasets.apps/v1"},
		{apitype.Resource{Group: "example.com", Version: "v1alpha1", Kind: "Widget", Plural: "widgets"},
			"example.com/v1alpha1", "widgets.example.com/v1alpha1"},
	}
	for _, tt := range tests {
		if got := tt.r.APIVersion(); got != tt.apiVersion {
			t.Errorf("%+v.APIVersion() = %q, want %q", tt.r, got, tt.apiVersion)
		}
		if got := tt.r.String(); got != tt.str {
			t.Errorf("%+v.String() = %q, want %q", tt.r, got, tt.str)
		}
	}
}

// res is a Resource, spelled out.
func res(group, version, kind, plural string, namespaced bool) apitype.Resource {
	return apitype.Resource{Group: group, Version: version, Kind: kind,
		Plural: plural, Namespaced: namespaced}
}

// widget is a valid declaration in group g, with Plural left to Declare.
func widget(g string) apitype.Resource {
	return apitype.Resource{Group: g, Version: "v1", Kind: "Widget", Namespaced: true}
}

// wantOf checks that Of[T] returns want as declared.
func wantOf[T any](t *testing.T, want apitype.Resource) {
	t.Helper()
	got, declared, err := apitype.Of((*T)(nil))
	if err != nil || !declared || got != want {
		t.Errorf("Of[%v]() = %+v, %v, %v, want %+v, true, nil",
			reflect.TypeFor[T](), got, declared, err, want)
	}
}

// wantOfErr checks that Of[T] fails with an error containing each of subs.
func wantOfErr[T any](t *testing.T, subs ...string) {
	t.Helper()
	got, declared, err := apitype.Of((*T)(nil))
	name := reflect.TypeFor[T]()
	if err == nil {
		t.Fatalf("Of[%v]() = %+v, %v, nil, want an error", name, got, declared)
	}
	if got != (apitype.Resource{}) || declared {
		t.Errorf("Of[%v]() = %+v, %v, %q, want a zero Resource and false", name, got, declared, err)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("Of[%v]() error %q does not mention %q", name, err, s)
		}
	}
}

func TestDeclare_WithoutPlural_DefaultsItFromKind(t *testing.T) {
	want := widget("defaults.example.com")
	want.Plural = "widgets"
	if got := apitype.Declare((*defaultsPluralWidget)(nil), widget("defaults.example.com")); got != want {
		t.Errorf("Declare[defaultsPluralWidget](...) = %+v, want %+v", got, want)
	}
	wantOf[defaultsPluralWidget](t, want)
}

func TestDeclare_WithPlural_KeepsIt(t *testing.T) {
	r := widget("explicit.example.com")
	r.Plural = "widgetry"
	if got := apitype.Declare((*explicitPluralWidget)(nil), r); got != r {
		t.Errorf("Declare[explicitPluralWidget](%+v) = %+v, want it unchanged", r, got)
	}
	wantOf[explicitPluralWidget](t, r)
}

func TestDeclare_SameTwice_IsHarmless(t *testing.T) {
	r := widget("same.example.com")
	first := apitype.Declare((*sameTwiceWidget)(nil), r)
	// Spelling out the default plural is the same declaration.
	r.Plural = "widgets"
	second := apitype.Declare((*sameTwiceWidget)(nil), r)
	if first != second {
		t.Errorf("Declare[sameTwiceWidget] twice = %+v, then %+v, want equal", first, second)
	}
	wantOf[sameTwiceWidget](t, first)
}

func TestDeclare_ConflictingTwice_IsReportedByOf(t *testing.T) {
	apitype.Declare((*conflictWidget)(nil), widget("one.example.com"))
	apitype.Declare((*conflictWidget)(nil), widget("two.example.com"))
	wantOfErr[conflictWidget](t, "apitype_test.conflictWidget", "declared twice",
		"widgets.one.example.com/v1", "widgets.two.example.com/v1", "kctl.Declare")
}

func TestDeclare_WithoutVersionOrKind_IsReportedByOf(t *testing.T) {
	noVersion := widget("noversion.example.com")
	noVersion.Version = ""
	apitype.Declare((*noVersionWidget)(nil), noVersion)
	wantOfErr[noVersionWidget](t, "Declare[apitype_test.noVersionWidget]", "Version and Kind")

	noKind := widget("nokind.example.com")
	noKind.Kind = ""
	apitype.Declare((*noKindWidget)(nil), noKind)
	wantOfErr[noKindWidget](t, "Declare[apitype_test.noKindWidget]", "Version and Kind")
}

func TestOf_UndeclaredLocalObject_ErrsNamingTheTypeAndDeclare(t *testing.T) {
	wantOfErr[undeclaredWidget](t, "apitype_test.undeclaredWidget", "kctl.Declare")
}

func TestOf_UndeclaredNonObject_Errs(t *testing.T) {
	wantOfErr[int](t, "int", "kctl.Declare")
	wantOfErr[struct{ Name string }](t, "kctl.Declare")
	wantOfErr[metav1.ObjectMeta](t, "v1.ObjectMeta", "kctl.Declare")
}

func TestOf_UndeclaredK8sIOAPIType_IsDerived(t *testing.T) {
	want := res("apps", "v1", "StatefulSet", "statefulsets", true)
	got, declared, err := apitype.Of((*appsv1.StatefulSet)(nil))
	if err != nil || declared || got != want {
		t.Errorf("Of[appsv1.StatefulSet]() = %+v, %v, %v, want %+v, false, nil",
			got, declared, err, want)
	}
}

func TestOfType_AgreesWithOf(t *testing.T) {
	apitype.Declare((*agreeWidget)(nil), widget("agree.example.com"))
	apitype.Declare((*agreeConflictWidget)(nil), widget("agree1.example.com"))
	apitype.Declare((*agreeConflictWidget)(nil), widget("agree2.example.com"))
	type result struct {
		r        apitype.Resource
		declared bool
		err      error
	}
	of := func(r apitype.Resource, d bool, err error) result { return result{r, d, err} }
	tests := []struct {
		typ reflect.Type
		of  result
	}{
		{reflect.TypeFor[agreeWidget](), of(apitype.Of((*agreeWidget)(nil)))},
		{reflect.TypeFor[agreeConflictWidget](), of(apitype.Of((*agreeConflictWidget)(nil)))},
		{reflect.TypeFor[undeclaredWidget](), of(apitype.Of((*undeclaredWidget)(nil)))},
		{reflect.TypeFor[corev1.ConfigMap](), of(apitype.Of((*corev1.ConfigMap)(nil)))},
		{reflect.TypeFor[string](), of(apitype.Of((*string)(nil)))},
	}
	for _, tt := range tests {
		got := of(apitype.OfType(tt.typ))
		sameErr := (got.err == nil) == (tt.of.err == nil) &&
			(got.err == nil || got.err.Error() == tt.of.err.Error())
		if got.r != tt.of.r || got.declared != tt.of.declared || !sameErr {
			t.Errorf("OfType(%v) = %+v, %v, %v, want Of's %+v, %v, %v", tt.typ,
				got.r, got.declared, got.err, tt.of.r, tt.of.declared, tt.of.err)
		}
	}
}

func TestDeclared_ListsValidDeclarations(t *testing.T) {
	w := apitype.Declare((*listedWidget)(nil), widget("listed.example.com"))
	g := apitype.Declare((*listedGadget)(nil), apitype.Resource{
		Group: "listed.example.com", Version: "v2", Kind: "Gadget"})
	bad := widget("unlisted.example.com")
	bad.Version = ""
	apitype.Declare((*unlistedWidget)(nil), bad)

	found := map[apitype.Resource]bool{}
	for _, r := range apitype.Declared() {
		found[r] = true
		if r.Group == "unlisted.example.com" {
			t.Errorf("Declared() lists %+v, declared without a Version", r)
		}
	}
	for _, want := range []apitype.Resource{w, g} {
		if !found[want] {
			t.Errorf("Declared() does not list %+v", want)
		}
	}
}

func TestDeclare_ConcurrentWithOf_IsSafe(t *testing.T) {
	r := widget("concurrent.example.com")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			apitype.Declare((*concurrentWidget)(nil), r)
			apitype.Of((*concurrentWidget)(nil))
			apitype.Declared()
		})
	}
	wg.Wait()
	r.Plural = "widgets"
	wantOf[concurrentWidget](t, r)
}

func TestResource_Path_OfCollectionsObjectsAndSubresources(t *testing.T) {
	deploys := apitype.Resource{Group: "apps", Version: "v1", Plural: "deployments", Namespaced: true}
	nodes := apitype.Resource{Version: "v1", Plural: "nodes"}
	for _, c := range []struct {
		r                    apitype.Resource
		namespace, name, sub string
		want                 string
	}{
		{deploys, "", "", "", "/apis/apps/v1/deployments"},
		{deploys, "shop", "", "", "/apis/apps/v1/namespaces/shop/deployments"},
		{deploys, "shop", "web", "status", "/apis/apps/v1/namespaces/shop/deployments/web/status"},
		{deploys, "a b", "c/d", "", "/apis/apps/v1/namespaces/a%20b/deployments/c%2Fd"},
		{nodes, "ignored", "n1", "", "/api/v1/nodes/n1"},
	} {
		got := c.r.Path(c.namespace, c.name, c.sub)
		if got != c.want {
			t.Errorf("%v.Path(%q, %q, %q) = %q, want %q", c.r, c.namespace, c.name, c.sub, got, c.want)
		}
	}
}
