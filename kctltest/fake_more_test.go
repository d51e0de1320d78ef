package kctltest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An injected error is what the verb returns, and the write does not happen;
// removing it restores the verb.
func TestFakeClient_InjectError_FailsThatVerbOnly(t *testing.T) {
	f := kctltest.NewFakeClient(t, &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
	injected := apierrors.NewServiceUnavailable("injected")
	var calls []string
	f.InjectError("update", func(ns, name string) error {
		calls = append(calls, ns+"/"+name)
		if name == "a" {
			return injected
		}
		return nil
	})
	g, err := f.Get(t.Context(), "ns", "a")
	if err != nil {
		t.Fatalf("Get, no error injected: %v", err)
	}
	g.Spec.Size = 3
	if err := f.Update(t.Context(), g); !errors.Is(err, injected) {
		t.Errorf("Update with an injected error = %v, want it", err)
	}
	if got, _ := f.Get(t.Context(), "ns", "a"); got.Spec.Size != 0 {
		t.Errorf("after the failed Update, size = %d, want 0 (unchanged)", got.Spec.Size)
	}
	if !slices.Equal(calls, []string{"ns/a"}) {
		t.Errorf("the injector saw %v, want [ns/a]", calls)
	}
	f.InjectError("update", nil)
	if err := f.Update(t.Context(), g); err != nil {
		t.Errorf("Update once the injector is removed = %v", err)
	}
	f.InjectError("get", func(string, string) error { return context.DeadlineExceeded })
	if _, err := f.Get(t.Context(), "ns", "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get with an injected error = %v", err)
	}
}

func TestFakeClient_InjectError_UnknownVerb_FailsTheTest(t *testing.T) {
	tb := &errorTB{TB: t}
	f := kctltest.NewFakeClient[gadget](tb)
	f.InjectError("upsert", func(string, string) error { return nil })
	if !strings.Contains(tb.msg, `no verb "upsert"`) || !strings.Contains(tb.msg, "update") {
		t.Errorf("InjectError of an unknown verb: test failure %q, want one naming it and the verbs", tb.msg)
	}
}

// errorTB records the message of Errorf.
type errorTB struct {
	testing.TB
	msg string
}

func (e *errorTB) Errorf(format string, args ...any) { e.msg = fmt.Sprintf(format, args...) }

// One Fake holds several types: each FakeClient sees its own type's
// objects, and resourceVersions increase across them, as on one server.
func TestFake_SeveralTypes_ShareOneStore(t *testing.T) {
	fake := kctltest.NewFake()
	gadgets := kctltest.FakeClientIn(t, fake, &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
	cms := kctltest.FakeClientIn(t, fake, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
	again := kctltest.FakeClientIn[gadget](t, fake)
	g, err := again.Get(t.Context(), "ns", "a")
	if err != nil {
		t.Fatalf("a second FakeClient of the same Fake and type: Get = %v, want the object", err)
	}
	cm, err := cms.Get(t.Context(), "ns", "a")
	if err != nil {
		t.Fatal(err)
	}
	if g.ResourceVersion == cm.ResourceVersion {
		t.Errorf("a Gadget and a ConfigMap of one Fake have resourceVersion %s both, want them distinct", g.ResourceVersion)
	}
	if err := gadgets.Delete(t.Context(), "ns", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(t.Context(), "ns", "a"); err != nil {
		t.Errorf("deleting the Gadget ns/a deleted the ConfigMap ns/a: %v", err)
	}
	if list, _ := again.List(t.Context(), kctl.ListOptions{}); len(list) != 0 {
		t.Errorf("Gadgets after the delete: %v, want none", names(list))
	}
}

// A reconcile records Events through a small interface; the FakeRecorder
// keeps them for the test.
func TestFakeRecorder_KeepsTheEvents(t *testing.T) {
	type recorder interface {
		Eventf(obj metav1.Object, eventType, reason, format string, args ...any)
		EventRelated(obj, related metav1.Object, eventType, reason, action, note string)
	}
	var _ recorder = (*kctl.EventRecorder)(nil)
	rec := &kctltest.FakeRecorder{}
	var r recorder = rec
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	r.Eventf(pod, corev1.EventTypeWarning, "Failed", "pulled %d times", 3)
	r.Eventf((*corev1.Pod)(nil), corev1.EventTypeNormal, "Nothing", "dropped")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	r.EventRelated(pod, node, corev1.EventTypeNormal, "Scheduled", "Binding", "assigned to n1")
	got := rec.Events()
	want := []kctltest.RecordedEvent{
		{Namespace: "ns", Name: "p", Kind: "Pod", Type: "Warning", Reason: "Failed", Message: "pulled 3 times", Action: "Failed"},
		{Namespace: "ns", Name: "p", Kind: "Pod", Type: "Normal", Reason: "Scheduled", Message: "assigned to n1", Action: "Binding", Related: "Node /n1"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Events() = %v, want %v", got, want)
	}
	if s := got[0].String(); s != "Warning Failed ns/p: pulled 3 times" {
		t.Errorf("String() = %q", s)
	}
}

// podClient is what podScenario uses of a client.
type podClient interface {
	Get(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	Create(ctx context.Context, obj *corev1.Pod) error
	Patch(ctx context.Context, obj *corev1.Pod, typ kctl.PatchType, data []byte, opts kctl.PatchOptions) error
}

// podScenario patches a Pod's containers with strategic merge patches: the
// list is merged by name (a merge patch would replace it, which a Pod's
// validation refuses, and the fake does not model validation).
func podScenario(t *testing.T, c podClient, ns string) []string {
	ctx := t.Context()
	var saw []string
	state := func(step string) {
		p, err := c.Get(ctx, ns, "p")
		if err != nil {
			saw = append(saw, fmt.Sprintf("%s: %v", step, err))
			return
		}
		var cs []string
		for _, c := range p.Spec.Containers {
			cs = append(cs, c.Name+"="+c.Image)
		}
		saw = append(saw, fmt.Sprintf("%s: containers %v, labels %v", step, cs, p.Labels))
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: map[string]string{"a": "1"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "one", Image: "img:1"}, {Name: "two", Image: "img:2"}}}}
	saw = append(saw, fmt.Sprintf("create: %v", c.Create(ctx, p)))
	named := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}}
	err := c.Patch(ctx, named, kctl.StrategicMergePatch, []byte(`{"metadata":{"labels":{"b":"2"}},"spec":{"containers":[{"name":"two","image":"img:22"}]}}`), kctl.PatchOptions{})
	saw = append(saw, fmt.Sprintf("strategic merge patch of container two: %v", err))
	state("after it")
	err = c.Patch(ctx, named, kctl.StrategicMergePatch, []byte(`{"metadata":{"labels":{"a":null}},"spec":{"containers":[{"name":"one","image":"img:11"}]}}`), kctl.PatchOptions{})
	saw = append(saw, fmt.Sprintf("strategic merge patch of container one, label a null: %v", err))
	state("after it")
	return saw
}

var wantPodScenario = []string{
	"create: <nil>",
	"strategic merge patch of container two: <nil>",
	"after it: containers [one=img:1 two=img:22], labels map[a:1 b:2]",
	"strategic merge patch of container one, label a null: <nil>",
	"after it: containers [one=img:11 two=img:22], labels map[b:2]",
}

func TestFakeClient_StrategicMergePatch_MergesByKey(t *testing.T) {
	got := podScenario(t, kctltest.NewFakeClient[corev1.Pod](t), "ns")
	if !slices.Equal(got, wantPodScenario) {
		t.Errorf("FakeClient Pod scenario:\n%s", diffLines(got, wantPodScenario))
	}
}

func TestFakeClient_StrategicMergePatch_IsWhatTheAPIServerDoes(t *testing.T) {
	env := kctltest.Start(t)
	got := podScenario(t, kctl.NewClient[corev1.Pod](env.Conn), env.Namespace(t))
	if !slices.Equal(got, wantPodScenario) {
		t.Errorf("API server Pod scenario:\n%s", diffLines(got, wantPodScenario))
	}
}

// An Update without a resourceVersion, or a Create without a name, is
// Invalid and names the field, as the API server's answer does.
func TestFakeClient_Invalid_NamesTheField(t *testing.T) {
	f := kctltest.NewFakeClient(t, &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
	err := f.Update(t.Context(), &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.resourceVersion") {
		t.Errorf("Update without a resourceVersion = %v, want Invalid naming metadata.resourceVersion", err)
	}
	err = f.Create(t.Context(), &gadget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.name") {
		t.Errorf("Create without a name = %v, want Invalid naming metadata.name", err)
	}
}
