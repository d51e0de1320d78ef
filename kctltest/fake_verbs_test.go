package kctltest_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// applyClient is gadgetClient with Apply: both the real client and the fake
// have it, and kctl's helpers take either (kctl.ObjectClient).
type applyClient interface {
	gadgetClient
	Apply(ctx context.Context, obj *gadget, opts kctl.PatchOptions) error
}

var (
	_ applyClient               = (*kctl.Client[gadget])(nil)
	_ applyClient               = (*kctltest.FakeClient[gadget])(nil)
	_ kctl.ObjectClient[gadget] = (*kctltest.FakeClient[gadget])(nil)
)

// verbsScenario is scenario for JSON and strategic merge patches, Apply,
// and kctl's helpers over a client: what each answers and leaves, one line
// per step, without the values only a server knows.
func verbsScenario(t *testing.T, c applyClient, ns string) []string {
	ctx := t.Context()
	var saw []string
	say := func(format string, args ...any) { saw = append(saw, fmt.Sprintf(format, args...)) }
	var lastRV string
	state := func(step, name string) {
		g, err := c.Get(ctx, ns, name)
		switch {
		case apierrors.IsNotFound(err):
			say("%s: NotFound", step)
		case err != nil:
			say("%s: %v", step, err)
		default:
			say("%s: generation %d, size %d, seen %d, labels %v, finalizers %v, deleting %t, resourceVersion changed %t",
				step, g.Generation, g.Spec.Size, g.Status.Seen, g.Labels, g.Finalizers, g.DeletionTimestamp != nil, g.ResourceVersion != lastRV)
			lastRV = g.ResourceVersion
		}
	}
	named := func(name string) *gadget { return &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}} }

	// JSON patch (RFC 6902).
	j := named("j")
	j.Spec.Size = 1
	say("create j: %v", c.Create(ctx, j))
	state("after create", "j")
	err := c.Patch(ctx, named("j"), kctl.JSONPatch, []byte(`[{"op":"test","path":"/spec/size","value":1},{"op":"replace","path":"/spec/size","value":2},{"op":"add","path":"/metadata/labels","value":{"a":"1"}}]`), kctl.PatchOptions{})
	say("JSON patch: %v", err)
	state("after JSON patch", "j")
	err = c.Patch(ctx, named("j"), kctl.JSONPatch, []byte(`[{"op":"test","path":"/spec/size","value":7},{"op":"replace","path":"/spec/size","value":3}]`), kctl.PatchOptions{})
	say("JSON patch whose test fails: code %d, Invalid=%t", statusCode(err), apierrors.IsInvalid(err))
	err = c.Patch(ctx, named("j"), kctl.JSONPatch, []byte(`[{"op":"replace","path":"/spec/missing","value":3}]`), kctl.PatchOptions{})
	say("JSON patch replacing a field the object lacks: %v", err)
	err = c.Patch(ctx, named("j"), kctl.JSONPatch, []byte(`[{"op":"remove","path":"/metadata/labels/a"},{"op":"add","path":"/metadata/finalizers","value":["x/y"]},{"op":"add","path":"/metadata/finalizers/-","value":"x/z"}]`), kctl.PatchOptions{})
	say("JSON patch of metadata: %v", err)
	state("after it", "j")
	err = c.Patch(ctx, named("j"), kctl.JSONPatch, []byte(`[{"op":"replace","path":"/status","value":{"seen":5}}]`), kctl.PatchOptions{Subresource: "status"})
	say("JSON patch of status: %v", err)
	state("after it", "j")
	err = c.Patch(ctx, named("j"), kctl.JSONPatch, []byte(`[{"op":"test","path":"/metadata/finalizers/0","value":"x/y"}]`), kctl.PatchOptions{})
	say("JSON patch that changes nothing: %v", err)
	state("after it", "j")

	// Strategic merge patch: k8s.io/api types only.
	err = c.Patch(ctx, named("j"), kctl.StrategicMergePatch, []byte(`{"spec":{"size":9}}`), kctl.PatchOptions{})
	say("strategic merge patch of a CRD's object: error %t", err != nil)

	// Server-side apply.
	ap := named("ap")
	ap.Labels = map[string]string{"a": "1", "b": "2"}
	ap.Spec.Size = 1
	say("apply without a field manager: error %t", c.Apply(ctx, ap, kctl.PatchOptions{}) != nil)
	say("apply ap as m1: %v", c.Apply(ctx, ap, kctl.PatchOptions{FieldManager: "m1"}))
	state("after apply", "ap")
	again := named("ap")
	again.Labels = map[string]string{"a": "1", "b": "2"}
	again.Spec.Size = 1
	say("apply the same again: %v", c.Apply(ctx, again, kctl.PatchOptions{FieldManager: "m1"}))
	state("after it", "ap")
	less := named("ap")
	less.Labels = map[string]string{"a": "1"}
	less.Spec.Size = 2
	say("apply without label b, size 2: %v", c.Apply(ctx, less, kctl.PatchOptions{FieldManager: "m1"}))
	state("after it", "ap")
	other := named("ap")
	other.Spec.Size = 3
	err = c.Apply(ctx, other, kctl.PatchOptions{FieldManager: "m2"})
	say("apply size 3 as m2: Conflict=%t", apierrors.IsConflict(err))
	state("after it", "ap")
	same := named("ap")
	same.Spec.Size = 2
	same.Labels = map[string]string{"c": "3"}
	say("apply size 2 and label c as m2: %v", c.Apply(ctx, same, kctl.PatchOptions{FieldManager: "m2"}))
	state("after it", "ap")
	size := func(n int) *gadget { g := named("ap"); g.Spec.Size = n; return g } // a fresh configuration: an applied one becomes the server's answer
	say("apply size 3 as m2, forced: %v", c.Apply(ctx, size(3), kctl.PatchOptions{FieldManager: "m2", Force: true}))
	state("after it", "ap")
	err = c.Apply(ctx, size(2), kctl.PatchOptions{FieldManager: "m1"})
	say("apply size 2 as m1 again: Conflict=%t, naming m2 and .spec.size: %t", apierrors.IsConflict(err),
		err != nil && strings.Contains(err.Error(), `Apply failed with 1 conflict: conflict with "m2": .spec.size`))
	stale := named("ap")
	stale.ResourceVersion = "1"
	stale.Spec.Size = 3
	err = c.Apply(ctx, stale, kctl.PatchOptions{FieldManager: "m2"})
	say("apply with a stale resourceVersion: Conflict=%t", apierrors.IsConflict(err))
	a := &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ap"}}
	a.Spec.Size = 5
	say("update: %v", c.Update(ctx, withRV(t, c, a)))
	err = c.Apply(ctx, size(3), kctl.PatchOptions{FieldManager: "m2"})
	say("apply size 3 as m2 over the update's size 5: Conflict=%t", apierrors.IsConflict(err))
	say("apply size 5 as m2: %v", c.Apply(ctx, size(5), kctl.PatchOptions{FieldManager: "m2"}))
	state("after it", "ap")

	// kctl's helpers.
	h := named("h")
	op, err := kctl.CreateOrUpdate(ctx, c, h, func(g *gadget) error { g.Spec.Size = 1; return nil })
	say("CreateOrUpdate of a new one: %s %v", op, err)
	op, err = kctl.CreateOrUpdate(ctx, c, named("h"), func(g *gadget) error { g.Spec.Size = 1; return nil })
	say("CreateOrUpdate with no change: %s %v", op, err)
	op, err = kctl.CreateOrUpdate(ctx, c, named("h"), func(g *gadget) error { g.Spec.Size = 2; return nil })
	say("CreateOrUpdate of size 2: %s %v", op, err)
	state("after it", "h")
	op, err = kctl.CreateOrPatch(ctx, c, named("h"), func(g *gadget) error { g.Status.Seen = 2; return nil })
	say("CreateOrPatch of status: %s %v", op, err)
	op, err = kctl.CreateOrPatch(ctx, c, named("h"), func(g *gadget) error { g.Spec.Size = 3; g.Status.Seen = 3; return nil })
	say("CreateOrPatch of both: %s %v", op, err)
	state("after it", "h")
	g, _ := c.Get(ctx, ns, "h")
	added, err := kctl.AddFinalizer(ctx, c, g, "x/f")
	say("AddFinalizer: %t %v, finalizers %v", added, err, g.Finalizers)
	added, err = kctl.AddFinalizer(ctx, c, g, "x/f")
	say("AddFinalizer again: %t %v", added, err)
	staleG := *g
	say("delete h: %v", c.Delete(ctx, ns, "h"))
	_, err = kctl.RemoveFinalizer(ctx, c, &staleG, "x/f")
	say("RemoveFinalizer from a stale copy: Conflict=%t", apierrors.IsConflict(err))
	g, _ = c.Get(ctx, ns, "h")
	removed, err := kctl.RemoveFinalizer(ctx, c, g, "x/f")
	say("RemoveFinalizer: %t %v", removed, err)
	state("after it", "h")
	return saw
}

// withRV returns obj with the stored object's resourceVersion.
func withRV(t *testing.T, c applyClient, obj *gadget) *gadget {
	cur, err := c.Get(t.Context(), obj.Namespace, obj.Name)
	if err != nil {
		t.Fatal(err)
	}
	obj.ResourceVersion = cur.ResourceVersion
	obj.Labels = cur.Labels
	return obj
}

var wantVerbsScenario = []string{
	"create j: <nil>",
	"after create: generation 1, size 1, seen 0, labels map[], finalizers [], deleting false, resourceVersion changed true",
	"JSON patch: <nil>",
	"after JSON patch: generation 2, size 2, seen 0, labels map[a:1], finalizers [], deleting false, resourceVersion changed true",
	"JSON patch whose test fails: code 422, Invalid=true",
	"JSON patch replacing a field the object lacks: <nil>",
	"JSON patch of metadata: <nil>",
	"after it: generation 2, size 2, seen 0, labels map[], finalizers [x/y x/z], deleting false, resourceVersion changed true",
	"JSON patch of status: <nil>",
	"after it: generation 2, size 2, seen 5, labels map[], finalizers [x/y x/z], deleting false, resourceVersion changed true",
	"JSON patch that changes nothing: <nil>",
	"after it: generation 2, size 2, seen 5, labels map[], finalizers [x/y x/z], deleting false, resourceVersion changed false",
	"strategic merge patch of a CRD's object: error true",
	"apply without a field manager: error true",
	"apply ap as m1: <nil>",
	"after apply: generation 1, size 1, seen 0, labels map[a:1 b:2], finalizers [], deleting false, resourceVersion changed true",
	"apply the same again: <nil>",
	"after it: generation 1, size 1, seen 0, labels map[a:1 b:2], finalizers [], deleting false, resourceVersion changed false",
	"apply without label b, size 2: <nil>",
	"after it: generation 2, size 2, seen 0, labels map[a:1], finalizers [], deleting false, resourceVersion changed true",
	"apply size 3 as m2: Conflict=true",
	"after it: generation 2, size 2, seen 0, labels map[a:1], finalizers [], deleting false, resourceVersion changed false",
	"apply size 2 and label c as m2: <nil>",
	"after it: generation 2, size 2, seen 0, labels map[a:1 c:3], finalizers [], deleting false, resourceVersion changed true",
	"apply size 3 as m2, forced: <nil>",
	"after it: generation 3, size 3, seen 0, labels map[a:1], finalizers [], deleting false, resourceVersion changed true",
	"apply size 2 as m1 again: Conflict=true, naming m2 and .spec.size: true",
	"apply with a stale resourceVersion: Conflict=true",
	"update: <nil>",
	"apply size 3 as m2 over the update's size 5: Conflict=true",
	"apply size 5 as m2: <nil>",
	"after it: generation 4, size 5, seen 0, labels map[a:1], finalizers [], deleting false, resourceVersion changed true",
	"CreateOrUpdate of a new one: created <nil>",
	"CreateOrUpdate with no change: unchanged <nil>",
	"CreateOrUpdate of size 2: updated <nil>",
	"after it: generation 2, size 2, seen 0, labels map[], finalizers [], deleting false, resourceVersion changed true",
	"CreateOrPatch of status: updated status only <nil>",
	"CreateOrPatch of both: updated with status <nil>",
	"after it: generation 3, size 3, seen 3, labels map[], finalizers [], deleting false, resourceVersion changed true",
	"AddFinalizer: true <nil>, finalizers [x/f]",
	"AddFinalizer again: false <nil>",
	"delete h: <nil>",
	"RemoveFinalizer from a stale copy: Conflict=true",
	"RemoveFinalizer: true <nil>",
	"after it: NotFound",
}

func TestFakeClient_VerbsScenario(t *testing.T) {
	got := verbsScenario(t, kctltest.NewFakeClient[gadget](t), "ns")
	if !slices.Equal(got, wantVerbsScenario) {
		t.Errorf("FakeClient scenario:\n%s", diffLines(got, wantVerbsScenario))
	}
}

// The fake's JSON patches, Apply and helpers do what the API server's do.
func TestFakeClient_VerbsScenario_IsWhatTheAPIServerDoes(t *testing.T) {
	env := kctltest.Start(t)
	env.Apply(t, "testdata/gadget-crd.yaml")
	got := verbsScenario(t, kctl.NewClient[gadget](env.Conn), env.Namespace(t))
	if !slices.Equal(got, wantVerbsScenario) {
		t.Errorf("API server scenario:\n%s", diffLines(got, wantVerbsScenario))
	}
}
