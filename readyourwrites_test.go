package kctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// A reconcile that creates, updates and deletes children of another type
// through a cached client reads each of its writes back at once, in the
// same reconcile and in the next one.
func TestController_ReadYourWrites_ChildrenOfAnotherTypeAreSeenAtOnce(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	secrets := ClientFor[corev1.Secret](mgr)
	const children = 5
	var created atomic.Int32
	var once sync.Once
	done := make(chan struct{})
	NewController(mgr, "ryw-children", func(ctx context.Context, parent *corev1.ConfigMap) (Result, error) {
		sel := labels.Set{"parent": parent.Name}
		list, err := secrets.List(ctx, ListOptions{Namespace: ns, Labels: labels.SelectorFromSet(sel)})
		if err != nil {
			return Result{}, err
		}
		if len(list) != int(created.Load()) {
			t.Errorf("List after %d creates returned %d children: a stale cache", created.Load(), len(list))
		}
		for _, s := range list {
			if string(s.Data["v"]) != "updated" {
				t.Errorf("List returned child %s with v=%q, want the update made right after its create", s.Name, s.Data["v"])
			}
		}
		if created.Load() == children {
			if err := secrets.Delete(ctx, ns, "child-0"); err != nil {
				return Result{}, err
			}
			list, err := secrets.List(ctx, ListOptions{Namespace: ns, Labels: labels.SelectorFromSet(sel)})
			if err != nil || len(list) != children-1 {
				t.Errorf("List after deleting a child = %d children, %v; want %d", len(list), err, children-1)
			}
			if _, err := secrets.Get(ctx, ns, "child-0"); !apierrors.IsNotFound(err) {
				t.Errorf("Get of the child just deleted = %v, want NotFound", err)
			}
			once.Do(func() { close(done) })
			return Result{}, nil
		}
		child := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("child-", created.Load()), Labels: sel},
			Data: map[string][]byte{"v": []byte("created")}}
		if err := secrets.Create(ctx, child); err != nil {
			return Result{}, err
		}
		created.Add(1)
		got, err := secrets.Get(ctx, ns, child.Name)
		if err != nil {
			t.Errorf("Get of the child just created: %v", err)
			return Result{}, err
		}
		got.Data["v"] = []byte("updated")
		if err := secrets.Update(ctx, got); err != nil {
			t.Errorf("Update of the child just read: %v", err)
			return Result{}, err
		}
		if got, err := secrets.Get(ctx, ns, child.Name); err != nil || string(got.Data["v"]) != "updated" {
			t.Errorf("Get of the child just updated = %v; want v=updated", err)
		}
		return Result{RequeueAfter: time.Nanosecond}, nil // the next reconcile lists at once
	})
	startManager(t, mgr)
	if err := NewClient[corev1.ConfigMap](mgr.conn).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "parent"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the controller made %d of %d children in 60s", created.Load(), children)
	}
}

// A reconcile whose Update conflicts (another writer changed the object
// after the cache's copy) is retried, logged at debug and counted in
// kctl_reconcile_conflicts_total and as reconcile_total{result="requeue"},
// never logged or counted as an error.
func TestController_Conflict_IsRetriedWithoutAnErrorLineAndCounted(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	var logs logBuffer
	mgr := testManager(t, cfg, ns, Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	cms := ClientFor[corev1.ConfigMap](mgr)
	other := NewClient[corev1.ConfigMap](mgr.conn) // another writer: the Manager does not know its writes
	var attempts atomic.Int32
	done := make(chan struct{})
	NewController(mgr, "conflict", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		if cm.Data["by"] == "controller" {
			return Result{}, nil
		}
		if attempts.Add(1) == 1 {
			theirs := cm.DeepCopy()
			theirs.Data = map[string]string{"by": "someone else"}
			if err := other.Update(ctx, theirs); err != nil {
				return Result{}, err
			}
		}
		cm.Data = map[string]string{"by": "controller"}
		if err := cms.Update(ctx, cm); err != nil {
			return Result{}, err
		}
		close(done)
		return Result{}, nil
	})
	stop := startManager(t, mgr)
	if err := other.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("no successful update in 60s after %d attempts; logs:\n%s", attempts.Load(), logs.String())
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if attempts.Load() < 2 {
		t.Errorf("%d attempts: the first one should have hit a Conflict", attempts.Load())
	}
	if strings.Contains(out, "level=ERROR") {
		t.Errorf("a Conflict was logged as an error:\n%s", out)
	}
	if !strings.Contains(out, "level=DEBUG msg=\"reconcile hit a conflict") {
		t.Errorf("no debug line for the Conflict:\n%s", out)
	}
	var page bytes.Buffer
	mgr.metrics.Page().WriteTo(&page)
	conflicts := strconv.Itoa(int(attempts.Load() - 1)) // every attempt but the last, which succeeded
	s := samples(page.String())
	for series, want := range map[string]string{
		`kctl_reconcile_conflicts_total{controller="conflict"}`:                      conflicts,
		`controller_runtime_reconcile_total{controller="conflict",result="requeue"}`: conflicts,
		`controller_runtime_reconcile_total{controller="conflict",result="error"}`:   "0",
		`controller_runtime_reconcile_errors_total{controller="conflict"}`:           "0",
	} {
		if s[series] != want {
			t.Errorf("metrics page: %s = %q, want %s", series, s[series], want)
		}
	}
}

// A key that hits a Conflict on every attempt is reported as an error at its
// fifth attempt in a row: quiet retries must not hide a reconcile that
// always writes from a stale copy.
func TestController_ConflictOnEveryAttempt_IsAnErrorAtTheFifth(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	var logs logBuffer
	mgr := testManager(t, cfg, ns, Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	cms := ClientFor[corev1.ConfigMap](mgr)
	other := NewClient[corev1.ConfigMap](mgr.conn)
	var attempts atomic.Int32
	NewController(mgr, "stuck", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		n := attempts.Add(1)
		theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name}}
		if err := other.Patch(ctx, theirs, MergePatch, []byte(fmt.Sprintf(`{"data":{"n":"%d"}}`, n)), PatchOptions{}); err != nil {
			return Result{}, err
		}
		cm.Data = map[string]string{"by": "controller"}
		return Result{}, cms.Update(ctx, cm) // always from the copy before their patch
	})
	startManager(t, mgr)
	if err := other.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "an error line", func() bool { return strings.Contains(logs.String(), "level=ERROR") })
	var errLines, debugLines []string
	for _, line := range strings.Split(logs.String(), "\n") {
		switch {
		case strings.Contains(line, "level=ERROR"):
			errLines = append(errLines, line)
		case strings.Contains(line, "reconcile hit a conflict"):
			debugLines = append(debugLines, line)
		}
	}
	if len(debugLines) != quietConflicts-1 || !strings.Contains(errLines[0], "attempt=5 ") || !strings.Contains(errLines[0], "Conflict") &&
		!strings.Contains(errLines[0], "the object has been modified") {
		t.Errorf("want %d quiet retries, then an error line at attempt 5; got debug lines:\n%s\nerror lines:\n%s",
			quietConflicts-1, strings.Join(debugLines, "\n"), strings.Join(errLines, "\n"))
	}
	// The metrics page agrees: the first four attempts (doc.go's Guarantees)
	// are requeues, and from the fifth on every attempt is an error, counted
	// as one: an always-stale reconcile shows in the error rate. (The page is
	// read until the error is counted: the log line comes just before it.)
	var requeues, errTotal string
	var errs int
	eventually(t, "the fifth attempt's error on the metrics page", func() bool {
		var page bytes.Buffer
		mgr.metrics.Page().WriteTo(&page)
		m := samples(page.String())
		requeues = m[`controller_runtime_reconcile_total{controller="stuck",result="requeue"}`]
		errs, _ = strconv.Atoi(m[`controller_runtime_reconcile_total{controller="stuck",result="error"}`])
		errTotal = m[`controller_runtime_reconcile_errors_total{controller="stuck"}`]
		return errs >= 1 && errTotal == strconv.Itoa(errs)
	})
	if requeues != "4" {
		t.Errorf("metrics page: %q requeue results, want 4 (then %d errors, errors_total %s)", requeues, errs, errTotal)
	}
}

// A write the cache never reaches (here a resourceVersion far ahead of the
// server's) makes a cached Get and List of it fail after the timeout (10 s;
// shortened here), with an error naming the object, even though the cache
// holds an older version of it.
func TestClient_ReadYourWrites_CacheNeverCatchesUp_FailsAfterTheTimeoutNamingTheObject(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	tracker := mgr.writes.(*writeTracker)
	tracker.timeout = 300 * time.Millisecond
	cms := ClientFor[corev1.ConfigMap](mgr)
	startManager(t, mgr)
	if err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ahead"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(t.Context(), ns, "ahead"); err != nil {
		t.Fatalf("Get of the object just created: %v", err)
	}
	tracker.record(cms.Resource(), &metav1.ObjectMeta{Namespace: ns, Name: "ahead", ResourceVersion: "999999999999"})
	get := func() error {
		_, err := cms.Get(t.Context(), ns, "ahead")
		return err
	}
	list := func() error {
		_, err := cms.List(t.Context(), ListOptions{Namespace: ns})
		return err
	}
	for _, read := range []struct {
		name string
		call func() error
	}{{"Get", get}, {"List", list}} {
		start := time.Now()
		err := read.call()
		took := time.Since(start)
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "write of "+ns+"/ahead") {
			t.Errorf("%s of a write the cache never reaches = %v, want a deadline error naming %s/ahead", read.name, err, ns)
		}
		if took < tracker.timeout || took > 5*time.Second {
			t.Errorf("%s failed after %v, want after the timeout of %v", read.name, took, tracker.timeout)
		}
	}
}
