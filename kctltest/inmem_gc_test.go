package kctltest_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podNames lists the Pods of ns by name, each with " (deleting)" if it is.
func podNames(t *testing.T, pods *kctl.Client[corev1.Pod], ns string) []string {
	t.Helper()
	list, err := pods.List(t.Context(), kctl.ListOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list {
		s := p.Name
		if p.DeletionTimestamp != nil {
			s += fmt.Sprintf(" (deleting, finalizers %v)", p.Finalizers)
		}
		out = append(out, s)
	}
	return out
}

// Deleting an owner deletes its children (background), waits for them
// first (foreground: the owner stays, deleting, until they are gone), or
// leaves them without the owner reference (orphan), as the garbage
// collector does.
func TestInMemory_Delete_CascadesAsTheGarbageCollector(t *testing.T) {
	env := kctltest.StartInMemory(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	rsets := kctl.NewClient[appsv1.ReplicaSet](env.Conn)
	pods := kctl.NewClient[corev1.Pod](env.Conn)
	make := func(name string, podFinalizer bool) *appsv1.ReplicaSet {
		rs := testReplicaSet(ns, name)
		if err := rsets.Create(ctx, rs); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			p := testPod(t, rs, fmt.Sprintf("%s-%d", name, i))
			if podFinalizer && i == 0 {
				p.Finalizers = []string{"example.com/hold"}
			}
			if err := pods.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		return rs
	}
	make("bg", false)
	make("fg", true)
	make("orphan", false)

	if err := rsets.DeleteWithOptions(ctx, ns, "bg", kctl.DeleteOptions{Propagation: metav1.DeletePropagationBackground}); err != nil {
		t.Fatal(err)
	}
	if got, want := podNames(t, pods, ns), []string{"fg-0", "fg-1", "orphan-0", "orphan-1"}; !slices.Equal(got, want) {
		t.Errorf("after a background delete of bg: Pods %v, want %v", got, want)
	}

	if err := rsets.DeleteWithOptions(ctx, ns, "fg", kctl.DeleteOptions{Propagation: metav1.DeletePropagationForeground}); err != nil {
		t.Fatal(err)
	}
	fg, err := rsets.Get(ctx, ns, "fg")
	if err != nil || fg.DeletionTimestamp == nil || !slices.Contains(fg.Finalizers, metav1.FinalizerDeleteDependents) {
		t.Errorf("after a foreground delete of fg with a held Pod: fg %v, %v; want it deleting with finalizer foregroundDeletion", fg, err)
	}
	if got, want := podNames(t, pods, ns), []string{"fg-0 (deleting, finalizers [example.com/hold])", "orphan-0", "orphan-1"}; !slices.Equal(got, want) {
		t.Errorf("after a foreground delete of fg: Pods %v, want %v", got, want)
	}
	held, err := pods.Get(ctx, ns, "fg-0")
	if err != nil {
		t.Fatal(err)
	}
	held.Finalizers = nil
	if err := pods.Update(ctx, held); err != nil {
		t.Fatal(err)
	}
	if _, err := rsets.Get(ctx, ns, "fg"); !apierrors.IsNotFound(err) {
		t.Errorf("after its last Pod went: get fg = %v, want NotFound", err)
	}

	if err := rsets.DeleteWithOptions(ctx, ns, "orphan", kctl.DeleteOptions{Propagation: metav1.DeletePropagationOrphan}); err != nil {
		t.Fatal(err)
	}
	if _, err := rsets.Get(ctx, ns, "orphan"); !apierrors.IsNotFound(err) {
		t.Errorf("after an orphan delete: get orphan = %v, want NotFound", err)
	}
	for _, name := range []string{"orphan-0", "orphan-1"} {
		p, err := pods.Get(ctx, ns, name)
		if err != nil || len(p.OwnerReferences) != 0 {
			t.Errorf("after an orphan delete of its owner: Pod %s = %v, %v; want it, without owner references", name, p, err)
		}
	}
}

// Deleting a namespace deletes its objects (those with finalizers are
// marked), then the namespace once the last is gone; meanwhile nothing
// new can be made in it.
func TestInMemory_DeleteNamespace_EmptiesItThenGoes(t *testing.T) {
	env := kctltest.StartInMemory(t)
	ctx := t.Context()
	namespaces := kctl.NewClient[corev1.Namespace](env.Conn)
	cms := kctl.NewClient[corev1.ConfigMap](env.Conn)
	if err := namespaces.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "doomed", Name: name}}
		if name == "b" {
			cm.Finalizers = []string{"example.com/hold"}
		}
		if err := cms.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	if err := namespaces.Delete(ctx, "", "doomed"); err != nil {
		t.Fatal(err)
	}
	ns, err := namespaces.Get(ctx, "", "doomed")
	if err != nil || ns.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("a namespace being emptied: %v, %v; want it Terminating", ns, err)
	}
	if _, err := cms.Get(ctx, "doomed", "a"); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap a of a namespace being deleted: %v, want NotFound", err)
	}
	err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "doomed", Name: "c"}})
	if !apierrors.IsForbidden(err) {
		t.Errorf("create in a namespace being deleted: %v, want Forbidden", err)
	}
	b, err := cms.Get(ctx, "doomed", "b")
	if err != nil || b.DeletionTimestamp == nil {
		t.Fatalf("ConfigMap b, with a finalizer: %v, %v; want it deleting", b, err)
	}
	b.Finalizers = nil
	if err := cms.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := namespaces.Get(ctx, "", "doomed"); !apierrors.IsNotFound(err) {
		t.Errorf("the namespace once empty: %v, want NotFound", err)
	}
	err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "nowhere", Name: "c"}})
	if !apierrors.IsNotFound(err) {
		t.Errorf("create in a namespace that does not exist: %v, want NotFound", err)
	}
}

// Delete preconditions: a uid or resourceVersion other than the object's
// is a Conflict, and deletes nothing.
func TestInMemory_DeletePreconditions_ConflictOnMismatch(t *testing.T) {
	env := kctltest.StartInMemory(t)
	ctx := t.Context()
	cms := kctl.NewClient[corev1.ConfigMap](env.Conn)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a"}}
	if err := cms.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	for what, opts := range map[string]kctl.DeleteOptions{"uid": {UID: "other"}, "resourceVersion": {ResourceVersion: "1"}} {
		err := cms.DeleteWithOptions(ctx, "default", "a", opts)
		if !apierrors.IsConflict(err) {
			t.Errorf("delete with another %s: %v, want Conflict", what, err)
		}
	}
	if err := cms.DeleteWithOptions(ctx, "default", "a", kctl.DeleteOptions{UID: cm.UID, ResourceVersion: cm.ResourceVersion}); err != nil {
		t.Errorf("delete with its uid and resourceVersion: %v", err)
	}
}

// What the in-memory server does not model is an error naming Start, not
// an object stored and ignored.
func TestInMemory_Unmodelled_SaysSoAndNamesStart(t *testing.T) {
	env := kctltest.StartInMemory(t)
	quotas := kctl.NewClient[corev1.ResourceQuota](env.Conn)
	err := quotas.Create(t.Context(), &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "q"}})
	if err == nil || !strings.Contains(err.Error(), "quotas") || !strings.Contains(err.Error(), "Start") {
		t.Errorf("create a ResourceQuota: %v, want an error naming quotas and Start", err)
	}
	pods := kctl.NewClient[corev1.Pod](env.Conn)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"}}
	if err := pods.Create(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	err = pods.Patch(t.Context(), p, kctl.MergePatch, []byte(`{}`), kctl.PatchOptions{Subresource: "ephemeralcontainers"})
	if err == nil || !strings.Contains(err.Error(), "Start") {
		t.Errorf("patch a subresource other than status: %v, want an error naming Start", err)
	}
	rs := kctl.NewClient[appsv1.ReplicaSet](env.Conn)
	r := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "r"}}
	if err := rs.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	err = rs.Patch(t.Context(), r, kctl.ApplyPatch, []byte(`{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"r"},"spec":{"replicas":3}}`),
		kctl.PatchOptions{Subresource: "scale", FieldManager: "test"})
	if err == nil || !strings.Contains(err.Error(), "Start") {
		t.Errorf("apply the scale subresource: %v, want an error naming Start", err)
	}
}

// An apply to a Pod's status sets its status, apart from the same
// manager's applies to the Pod: the next of those still removes the label
// that the one before the status's set. The in-memory server does as the
// API server does.
func TestInMemory_ApplyOfStatus_IsApartFromTheObjectsApply(t *testing.T) {
	env := kctltest.StartInMemory(t)
	applyOfStatus(t, env, "default")
}

func TestApplyOfStatus_IsApartFromTheObjectsApply(t *testing.T) {
	env := kctltest.Start(t)
	applyOfStatus(t, env, env.Namespace(t))
}

func applyOfStatus(t *testing.T, env *kctltest.Env, ns string) {
	pods := kctl.NewClient[corev1.Pod](env.Conn)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if err := pods.Create(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	apply := func(cfg string, subresource string) {
		t.Helper()
		err := pods.Patch(t.Context(), p, kctl.ApplyPatch, []byte(cfg), kctl.PatchOptions{Subresource: subresource, FieldManager: "test"})
		if err != nil {
			t.Fatalf("apply (subresource %q): %v", subresource, err)
		}
	}
	apply(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"b"}}}`, "")
	apply(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"status":{"phase":"Running"}}`, "status")
	apply(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`, "")
	got, err := pods.Get(t.Context(), ns, "p")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.PodRunning || len(got.Labels) != 0 {
		t.Errorf("after applies of the Pod with a label, of its status, then of the Pod without it: phase %q, labels %v; want Running and none",
			got.Status.Phase, got.Labels)
	}
}
