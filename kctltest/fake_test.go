package kctltest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// gadgetClient is what a reconcile function would depend on; both the real
// client and the fake satisfy it.
type gadgetClient interface {
	Get(ctx context.Context, namespace, name string) (*gadget, error)
	List(ctx context.Context, opts kctl.ListOptions) ([]*gadget, error)
	Create(ctx context.Context, obj *gadget) error
	Update(ctx context.Context, obj *gadget) error
	UpdateStatus(ctx context.Context, obj *gadget) error
	Patch(ctx context.Context, obj *gadget, typ kctl.PatchType, data []byte, opts kctl.PatchOptions) error
	Delete(ctx context.Context, namespace, name string) error
	ApplyConfig(ctx context.Context, config any, opts kctl.PatchOptions) (*gadget, error)
	DeleteWithOptions(ctx context.Context, namespace, name string, opts kctl.DeleteOptions) error
	DeleteAllOf(ctx context.Context, opts kctl.ListOptions, del kctl.DeleteOptions) error
}

var (
	_ gadgetClient = (*kctl.Client[gadget])(nil)
	_ gadgetClient = (*kctltest.FakeClient[gadget])(nil)
)

// scenario runs the writes a reconcile makes through c in namespace ns and
// returns what it saw, one line per step, without the values only a server
// knows (resourceVersions, uids, times).
func scenario(t *testing.T, c gadgetClient, ns string) []string {
	ctx := t.Context()
	var saw []string
	say := func(format string, args ...any) { saw = append(saw, fmt.Sprintf(format, args...)) }
	state := func(step string) {
		g, err := c.Get(ctx, ns, "a")
		switch {
		case apierrors.IsNotFound(err):
			say("%s: NotFound", step)
		case err != nil:
			say("%s: %v", step, err)
		default:
			say("%s: generation %d, size %d, seen %d, finalizers %v, deleting %t",
				step, g.Generation, g.Spec.Size, g.Status.Seen, g.Finalizers, g.DeletionTimestamp != nil)
		}
	}
	a := &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a", Labels: map[string]string{"app": "x"}, Finalizers: []string{"kctl.dev/test"}}}
	a.Spec.Size = 1
	a.Status.Seen = 9 // the status subresource: Create ignores it
	say("create: %v", c.Create(ctx, a))
	state("after create")
	say("create again: AlreadyExists=%t", apierrors.IsAlreadyExists(c.Create(ctx, &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}})))
	withRV := &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c", ResourceVersion: "1"}}
	say("create with a resourceVersion: code %d", statusCode(c.Create(ctx, withRV)))
	_, err := c.Get(ctx, ns, "c")
	say("get it: NotFound=%t", apierrors.IsNotFound(err))
	gen := &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "gen-"}}
	err = c.Create(ctx, gen)
	suffix, ok := strings.CutPrefix(gen.Name, "gen-")
	say("create with generateName gen-: %v, named gen- and %d more characters: %t", err, len(suffix), ok)
	_, err = c.Get(ctx, ns, gen.Name)
	say("get it by that name: %v", err)
	b := &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b", Labels: map[string]string{"app": "y"}}}
	say("create b: %v", c.Create(ctx, b))

	stale := *a
	a.Spec.Size = 2
	a.Status.Seen = 7 // ignored by Update
	say("update: %v", c.Update(ctx, a))
	state("after update")
	stale.Spec.Size = 3
	say("update with a stale resourceVersion: Conflict=%t", apierrors.IsConflict(c.Update(ctx, &stale)))
	a.Status.Seen = 2
	say("update status: %v", c.UpdateStatus(ctx, a))
	state("after update status")
	a.Labels["more"] = "yes"
	say("update of metadata only: %v", c.Update(ctx, a))
	state("after metadata update")

	named := func() *gadget { return &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}} }
	err = c.Patch(ctx, named(), kctl.MergePatch, []byte(`{"spec":{"size":4},"status":{"seen":100}}`), kctl.PatchOptions{})
	say("merge patch: %v", err)
	state("after merge patch")
	err = c.Patch(ctx, named(), kctl.MergePatch, []byte(`{"status":{"seen":4}}`), kctl.PatchOptions{Subresource: "status"})
	say("merge patch of status: %v", err)
	err = c.Patch(ctx, named(), kctl.MergePatch, []byte(`{"metadata":{"resourceVersion":"1"},"spec":{"size":5}}`), kctl.PatchOptions{})
	say("merge patch with a stale resourceVersion: Conflict=%t", apierrors.IsConflict(err))
	state("after patches")
	applyStatus := func(manager string, seen int, force bool) error {
		cfg := fmt.Appendf(nil, `{"apiVersion":"kctltest.kctl.dev/v1","kind":"Gadget","metadata":{"name":"a"},"spec":{"size":9},"status":{"seen":%d}}`, seen)
		return c.Patch(ctx, named(), kctl.ApplyPatch, cfg, kctl.PatchOptions{FieldManager: manager, Subresource: "status", Force: force})
	}
	say("apply of status seen 5 (and size 9) as s1, forced: %v", applyStatus("s1", 5, true))
	state("after apply of status")
	say("apply of status seen 6 as s2: Conflict=%t", apierrors.IsConflict(applyStatus("s2", 6, false)))

	list, err := c.List(ctx, kctl.ListOptions{Namespace: ns, Labels: labels.SelectorFromSet(labels.Set{"app": "x"})})
	say("list app=x: %v %v", names(list), err)
	list, err = c.List(ctx, kctl.ListOptions{Namespace: ns, Fields: "metadata.name=b"})
	say("list metadata.name=b: %v %v", names(list), err)

	say("delete: %v", c.Delete(ctx, ns, "a"))
	state("after delete")
	err = c.Patch(ctx, named(), kctl.MergePatch, []byte(`{"metadata":{"finalizers":null}}`), kctl.PatchOptions{})
	say("remove the finalizer: %v", err)
	state("after removing the finalizer")
	say("delete b: %v", c.Delete(ctx, ns, "b"))
	say("delete b again: NotFound=%t", apierrors.IsNotFound(c.Delete(ctx, ns, "b")))

	config := map[string]any{"metadata": map[string]any{"name": "d", "namespace": ns, "labels": map[string]any{"app": "z"}}, "spec": map[string]any{"size": 7}}
	d, err := c.ApplyConfig(ctx, config, kctl.PatchOptions{FieldManager: "cfg"})
	say("apply config d size 7: %v, size %d", err, sizeOf(d))
	_, err = c.ApplyConfig(ctx, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "d", "namespace": ns}}, kctl.PatchOptions{FieldManager: "cfg"})
	say("apply config of another kind: refused %t", err != nil && strings.Contains(err.Error(), "apply it with a client of that type"))
	err = c.DeleteWithOptions(ctx, ns, "d", kctl.DeleteOptions{UID: "not-its-uid"})
	say("delete d with another UID: Conflict=%t", apierrors.IsConflict(err))
	err = c.DeleteWithOptions(ctx, ns, "d", kctl.DeleteOptions{ResourceVersion: "1"})
	say("delete d with a stale resourceVersion: Conflict=%t", apierrors.IsConflict(err))
	say("delete d with its UID and resourceVersion: %v", c.DeleteWithOptions(ctx, ns, "d", kctl.DeleteOptions{UID: d.UID, ResourceVersion: d.ResourceVersion}))
	for _, name := range []string{"e", "f", "g"} {
		app := "z"
		if name == "g" {
			app = "y"
		}
		c.Create(ctx, &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}}})
	}
	err = c.DeleteAllOf(ctx, kctl.ListOptions{Namespace: ns, Labels: labels.SelectorFromSet(labels.Set{"app": "z"})}, kctl.DeleteOptions{})
	labelled, _ := labels.Parse("app")
	list, _ = c.List(ctx, kctl.ListOptions{Namespace: ns, Labels: labelled})
	say("delete all of app=z: %v, left with an app label %v", err, names(list))
	return saw
}

// sizeOf is g's spec.size; -1 if g is nil.
func sizeOf(g *gadget) int {
	if g == nil {
		return -1
	}
	return int(g.Spec.Size)
}

// statusCode is the HTTP status of the API error err wraps; 0 if none.
func statusCode(err error) int32 {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return 0
	}
	return st.Status().Code
}

func names(list []*gadget) []string {
	var out []string
	for _, g := range list {
		out = append(out, g.Name)
	}
	return out
}

var wantScenario = []string{
	"create: <nil>",
	"after create: generation 1, size 1, seen 0, finalizers [kctl.dev/test], deleting false",
	"create again: AlreadyExists=true",
	"create with a resourceVersion: code 500",
	"get it: NotFound=true",
	"create with generateName gen-: <nil>, named gen- and 5 more characters: true",
	"get it by that name: <nil>",
	"create b: <nil>",
	"update: <nil>",
	"after update: generation 2, size 2, seen 0, finalizers [kctl.dev/test], deleting false",
	"update with a stale resourceVersion: Conflict=true",
	"update status: <nil>",
	"after update status: generation 2, size 2, seen 2, finalizers [kctl.dev/test], deleting false",
	"update of metadata only: <nil>",
	"after metadata update: generation 2, size 2, seen 2, finalizers [kctl.dev/test], deleting false",
	"merge patch: <nil>",
	"after merge patch: generation 3, size 4, seen 2, finalizers [kctl.dev/test], deleting false",
	"merge patch of status: <nil>",
	"merge patch with a stale resourceVersion: Conflict=true",
	"after patches: generation 3, size 4, seen 4, finalizers [kctl.dev/test], deleting false",
	"apply of status seen 5 (and size 9) as s1, forced: <nil>",
	"after apply of status: generation 3, size 4, seen 5, finalizers [kctl.dev/test], deleting false",
	"apply of status seen 6 as s2: Conflict=true",
	"list app=x: [a] <nil>",
	"list metadata.name=b: [b] <nil>",
	"delete: <nil>",
	"after delete: generation 4, size 4, seen 5, finalizers [kctl.dev/test], deleting true",
	"remove the finalizer: <nil>",
	"after removing the finalizer: NotFound",
	"delete b: <nil>",
	"delete b again: NotFound=true",
	"apply config d size 7: <nil>, size 7",
	"apply config of another kind: refused true",
	"delete d with another UID: Conflict=true",
	"delete d with a stale resourceVersion: Conflict=true",
	"delete d with its UID and resourceVersion: <nil>",
	"delete all of app=z: <nil>, left with an app label [g]",
}

func TestFakeClient_Scenario(t *testing.T) {
	got := scenario(t, kctltest.NewFakeClient[gadget](t), "ns")
	if !slices.Equal(got, wantScenario) {
		t.Errorf("FakeClient scenario:\n%s", diffLines(got, wantScenario))
	}
}

// The fake's answers are the API server's: the same scenario against a real
// kube-apiserver sees the same.
func TestFakeClient_Scenario_IsWhatTheAPIServerDoes(t *testing.T) {
	env := kctltest.Start(t)
	env.Apply(t, "testdata/gadget-crd.yaml")
	got := scenario(t, kctl.NewClient[gadget](env.Conn), env.Namespace(t))
	if !slices.Equal(got, wantScenario) {
		t.Errorf("API server scenario:\n%s", diffLines(got, wantScenario))
	}
}

func TestFakeClient_Unmodelled_SaysSoAndNamesStart(t *testing.T) {
	f := kctltest.NewFakeClient[gadget](t, &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
	named := func() *gadget { return &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}} }
	cms := kctltest.NewFakeClient(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
	for what, err := range map[string]error{
		"a patch of an unknown type": f.Patch(t.Context(), named(), "application/x-unknown", []byte(`{}`), kctl.PatchOptions{}),
		"a strategic merge patch directive": cms.Patch(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}},
			kctl.StrategicMergePatch, []byte(`{"$patch":"replace","data":{"a":"b"}}`), kctl.PatchOptions{}),
		"Apply of the scale subresource": f.Patch(t.Context(), named(), kctl.ApplyPatch, []byte(`{}`), kctl.PatchOptions{FieldManager: "x", Subresource: "scale"}),
		"a Foreground deletion":          f.DeleteWithOptions(t.Context(), "ns", "a", kctl.DeleteOptions{Propagation: metav1.DeletePropagationForeground}),
	} {
		if err == nil || !strings.Contains(err.Error(), "Start") {
			t.Errorf("%s: %v, want an error naming Start", what, err)
		}
	}
	if _, err := f.List(t.Context(), kctl.ListOptions{Fields: "spec.size=1"}); err == nil || !strings.Contains(err.Error(), "Start") {
		t.Errorf("List with a field selector on spec.size: %v, want an error naming Start", err)
	}
}

func diffLines(got, want []string) string {
	var out string
	for i := range max(len(got), len(want)) {
		g, w := "(none)", "(none)"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		mark := "  "
		if g != w {
			mark = "! "
		}
		out += fmt.Sprintf("%sgot  %s\n%swant %s\n", mark, g, mark, w)
	}
	return out
}

// fatalTB records the message of Fatalf and ends the goroutine, as t.Fatalf does.
type fatalTB struct {
	testing.TB
	ctx context.Context
	msg string
}

func (f *fatalTB) Helper()                  {}
func (f *fatalTB) Context() context.Context { return f.ctx }
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// waitFailure runs WaitFor for an object that never meets the condition,
// until ctx ends, and returns the failure message.
func waitFailure(t *testing.T, c kctltest.Getter[gadget], name string) string {
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	tb := &fatalTB{TB: t, ctx: ctx}
	done := make(chan struct{})
	go func() {
		defer close(done)
		kctltest.WaitFor(tb, c, "ns", name, func(g *gadget) bool { return false })
	}()
	<-done
	return tb.msg
}

func TestWaitFor_Failure_ShowsTheLastStateSeen(t *testing.T) {
	g := &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	g.Spec.Size = 42
	f := kctltest.NewFakeClient(t, g)
	msg := waitFailure(t, f, "a")
	if !strings.Contains(msg, `"size": 42`) || !strings.Contains(msg, "gadget ns/a") || strings.Contains(msg, "managedFields") {
		t.Errorf("WaitFor failure = %q, want it to name gadget ns/a and show the object without managedFields", msg)
	}
	if msg := waitFailure(t, f, "missing"); !strings.Contains(msg, "NotFound") {
		t.Errorf("WaitFor failure for a missing object = %q, want NotFound", msg)
	}
}
