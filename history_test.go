package kctl

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/controlplane"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 25, item 15: the history shows a success, a filtered event, a
// backoff, a terminal error and a timeout, from Go (kctl/debug's test
// shows them on its pages).
func TestHistory_ShowsEachOutcomeFromGo(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	mgr.KeepHistory(HistoryOptions{})
	cms := ClientFor[corev1.ConfigMap](mgr)
	c := NewController(mgr, "history", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) {
		switch cm.Name {
		case "fails":
			return Result{}, errors.New("the disk is full")
		case "terminal":
			return Result{}, Terminal(errors.New("bad spec"))
		case "slow":
			<-ctx.Done()
			return Result{}, nil
		}
		return Result{}, nil
	})
	c.WithPredicates(GenerationChanged)
	c.WithReconcileTimeout(200 * time.Millisecond)
	c.WithRateLimiter(NewRateLimiter[Key](time.Hour, time.Hour, 10, 100)) // one failure, then a long wait
	startManager(t, mgr)
	ctx := t.Context()
	for _, name := range []string{"ok", "fails", "terminal", "slow"} {
		if err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	history := func(name string) KeyHistory {
		t.Helper()
		h, err := mgr.History("history", Key{Namespace: ns, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	last := func(name string) ReconcileEntry {
		h := history(name)
		if len(h.Reconciles) == 0 {
			return ReconcileEntry{}
		}
		return h.Reconciles[len(h.Reconciles)-1]
	}
	eventually(t, "each key reconciled once", func() bool {
		for _, name := range []string{"ok", "fails", "terminal", "slow"} {
			if last(name).Result == "" {
				return false
			}
		}
		return true
	})
	for name, want := range map[string]string{"ok": "success", "fails": "error", "terminal": "terminal", "slow": "timeout"} {
		if got := last(name); got.Result != want || got.Trigger == "" || got.Attempt != 1 {
			t.Errorf("last reconcile of %s = %+v, want result %s, a trigger and attempt 1", name, got, want)
		}
	}
	if got := last("fails").Error; got != "the disk is full" {
		t.Errorf("error text of fails = %q", got)
	}
	fails := history("fails").State
	if fails.WaitingFor != "retry" || time.Until(fails.WaitingUntil) < 50*time.Minute || fails.BackoffAttempt != 1 {
		t.Errorf("state of fails = %+v, want waiting about an hour for a retry, backoff attempt 1", fails)
	}
	// A label change fails GenerationChanged: dropped, not reconciled.
	ok := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ok"}}
	if err := cms.Patch(ctx, ok, MergePatch, []byte(`{"metadata":{"labels":{"a":"b"}}}`), PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the label change dropped", func() bool { return history("ok").State.LastDropped == "WithPredicates #1" })
	if n := len(history("ok").Reconciles); n != 1 {
		t.Errorf("ok has %d reconciles after a dropped event, want 1", n)
	}

	keys := mgr.Histories()["history"]
	if len(keys) != 4 || keys[0].Name != "ok" {
		t.Errorf("Histories()[history] = %v, want the 4 keys, ok (its event dropped last) first", keys)
	}
}

func TestHistory_OffUnlessAsked(t *testing.T) {
	mgr := testManager(t, noServer(), "default", Options{})
	NewController(mgr, "quiet", func(ctx context.Context, cm *corev1.ConfigMap) (Result, error) { return Result{}, nil })
	if _, err := mgr.History("quiet", Key{Name: "x"}); err == nil || !strings.Contains(err.Error(), "KeepHistory") {
		t.Errorf("History with history off = %v, want an error naming KeepHistory", err)
	}
	if h := mgr.Histories(); h != nil {
		t.Errorf("Histories() with history off = %v, want nil", h)
	}
	if _, on := mgr.books(); on {
		t.Errorf("a Manager keeps history books with history off")
	}
}

// The bound holds with 100,000 keys: the book keeps Keys keys, PerKey
// entries each, and its heap stays within the stated size.
func TestHistory_HundredThousandKeys_StayWithinBound(t *testing.T) {
	if !controlplane.InOwnProcess(t) {
		return // a heap bound: measured where no other test's memory is live
	}
	opts := HistoryOptions{PerKey: 10, Keys: 1000}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	book := newBooks(opts).Of("c")
	start := time.Now()
	pad := strings.Repeat("x", 90)
	for i := range 100_000 {
		k := Key{Namespace: "ns", Name: fmt.Sprint("key-", i)}
		for j := range 12 {
			t := Trigger{Cause: "updated", Detail: "spec labels", Attempt: 1, queued: start}
			failure := fmt.Errorf("%s %6d %3d", pad, i, j) // 101 bytes, its own
			book.Add(k, entryOf(t, start, time.Millisecond, Result{}, failure))
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := len(book.Keys()); n != opts.Keys {
		t.Errorf("the book holds %d keys, want %d", n, opts.Keys)
	}
	for _, k := range book.Keys()[:10] {
		if entries, _, _ := book.Get(k); len(entries) != opts.PerKey {
			n := len(entries)
			t.Errorf("key %s holds %d entries, want %d", k, n, opts.PerKey)
		}
	}
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	perEntry := grew / int64(opts.Keys*opts.PerKey)
	t.Logf("history of %d keys x %d entries (101-byte errors): %d bytes, %d per entry", opts.Keys, opts.PerKey, grew, perEntry)
	// Stated in KeepHistory: at most 350 bytes per entry plus its error text.
	if limit := int64(opts.Keys*opts.PerKey) * (350 + 112); grew > limit {
		t.Errorf("the history takes %d bytes, over the stated bound %d", grew, limit)
	}
	runtime.KeepAlive(book)
}

// BenchmarkHistory_Reconciled is the cost a reconcile pays with history on.
func BenchmarkHistory_Reconciled(b *testing.B) {
	book := newBooks(HistoryOptions{PerKey: 10, Keys: 1000}).Of("c")
	keys := make([]Key, 2000)
	for i := range keys {
		keys[i] = Key{Namespace: "ns", Name: fmt.Sprint("key-", i)}
	}
	now := time.Now()
	t := Trigger{Cause: "updated", Detail: "spec", Attempt: 1, queued: now}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		book.Add(keys[i%len(keys)], entryOf(t, now, time.Millisecond, Result{}, nil))
	}
}
