package widgets

import (
	"testing"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/kctltest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWidget_BecomesReady(t *testing.T) {
	env := kctltest.StartInMemory(t)
	env.Apply(t, "testdata/widget-crd.yaml")
	ns := env.Namespace(t)
	env.Manager(t, kctl.Options{Cache: kctl.CacheOptions{DefaultScope: kctl.Scope{Namespaces: []string{ns}}}}, Setup)
	widgets := kctl.NewClient[Widget](env.Conn)
	w := &Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}}
	w.Spec.Size = 3
	if err := widgets.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	kctltest.WaitFor(t, widgets, ns, "hello", func(w *Widget) bool { return w != nil && w.Status.Ready })
}
