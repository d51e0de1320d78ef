package debug

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/servetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 25, item 15: the history pages show a success, a filtered event,
// a backoff, a terminal error and a timeout (kctl's history_test.go shows
// them from Go).
func TestServeHistory_ShowsEachOutcomeOnThePages(t *testing.T) {
	cfg := servetest.Config(t)
	ns := servetest.Namespace(t)
	mgr := servetest.Manager(t, cfg, ns, kctl.Options{})
	addr := servetest.FreeAddr(t)
	if err := ServeHistory(mgr, addr); err != nil {
		t.Fatal(err)
	}
	cms := kctl.ClientFor[corev1.ConfigMap](mgr)
	c := kctl.NewController(mgr, "history", func(ctx context.Context, cm *corev1.ConfigMap) (kctl.Result, error) {
		switch cm.Name {
		case "fails":
			return kctl.Result{}, errors.New("the disk is full")
		case "terminal":
			return kctl.Result{}, kctl.Terminal(errors.New("bad spec"))
		case "slow":
			<-ctx.Done()
			return kctl.Result{}, nil
		}
		return kctl.Result{}, nil
	})
	c.WithPredicates(kctl.GenerationChanged)
	c.WithReconcileTimeout(200 * time.Millisecond)
	c.WithRateLimiter(kctl.NewRateLimiter[kctl.Key](time.Hour, time.Hour, 10, 100)) // one failure, then a long wait
	servetest.Start(t, mgr)
	ctx := t.Context()
	for _, name := range []string{"ok", "fails", "terminal", "slow"} {
		if err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	list := "/debug/kctl/controllers/history?format=json"
	servetest.PollPage(t, addr, list, "each key reconciled once", func(code int, body string) bool {
		return code == 200 && strings.Count(body, `"lastResult"`) == 4
	})
	// A label change fails GenerationChanged: dropped, not reconciled.
	ok := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ok"}}
	if err := cms.Patch(ctx, ok, kctl.MergePatch, []byte(`{"metadata":{"labels":{"a":"b"}}}`), kctl.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	okPage := "/debug/kctl/controllers/history?namespace=" + ns + "&name=ok"
	servetest.PollPage(t, addr, okPage, "the predicate that dropped ok's event", func(code int, body string) bool {
		return code == 200 && strings.Contains(body, "last event dropped by WithPredicates #1")
	})
	get := func(path string) string {
		t.Helper()
		code, body := servetest.Get(t, addr, "", path)
		if code != 200 {
			t.Fatalf("GET %s = %d %s", path, code, body)
		}
		return body
	}
	page := get("/debug/kctl/controllers/history?namespace=" + ns + "&name=fails")
	for _, want := range []string{"waiting until", "(retry)", "in backoff, attempt 2", "the disk is full", "<td>error</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page of fails lacks %q:\n%s", want, page)
		}
	}
	body := get(list)
	for _, want := range []string{`"lastResult":"timeout"`, `"lastResult":"terminal"`, `"lastResult":"success"`, `"lastResult":"error"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the controller's JSON lacks %s:\n%s", want, body)
		}
	}
	if all := get("/debug/kctl/controllers?format=json"); !strings.Contains(all, `"history":4`) {
		t.Errorf("the controllers' JSON = %s, want history with 4 keys", all)
	}
	if all := get("/debug/kctl/controllers"); !strings.Contains(all, `<a href="controllers/history">history</a>`) {
		t.Errorf("the controllers' page = %s, want a link to history", all)
	}
}
