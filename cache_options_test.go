package kctl

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kctl-dev/kctl/internal/resync"
	"github.com/kctl-dev/kctl/internal/share"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// resyncSeen is an event a handler got, and when (in the bubble's time).
type resyncSeen struct {
	at     time.Duration // since the test began
	key    string
	rv     string
	resync bool
	typ    EventType
}

// Issue 25, item 7: one resync re-delivers each object once, spread over
// the first half of the period, not at once; live changes during it go
// out at once, and the next resync sends an object's newest state.
func TestInformer_Resync_SpreadsOverTheWindow_LiveChangesNotHeldBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 300
		period := 10 * time.Second
		inf := &Informer[corev1.ConfigMap]{informer[*corev1.ConfigMap]{
			store:     newStore[*corev1.ConfigMap](),
			transform: func(*corev1.ConfigMap) {},
			sharer:    share.New((*corev1.ConfigMap)(nil)),
			log:       slog.New(slog.DiscardHandler),
		}}
		w := &watchState{synced: true}
		inf.watches = []*watchState{w}
		for k := range n {
			inf.store.put(storeCM("ns", fmt.Sprintf("cm-%03d", k), "1", nil))
		}
		ctx, cancel := context.WithCancel(t.Context())
		begin := time.Now()
		var mu sync.Mutex
		var seen []resyncSeen
		inf.ctx = ctx
		inf.AddHandler(func(e Event[corev1.ConfigMap]) {
			if e.Initial {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, resyncSeen{time.Since(begin), e.Object.Namespace + "/" + e.Object.Name, e.Object.ResourceVersion, e.Resync, e.Type})
		})
		inf.resyncEvery(period)
		inf.mu.Lock()
		inf.goLocked(inf.resync)
		inf.mu.Unlock()
		snapshot := func() []resyncSeen {
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			return append([]resyncSeen(nil), seen...)
		}

		// Half way through the first resync's window (10 s to 15 s).
		time.Sleep(period + period/4)
		mid := snapshot()
		if len(mid) < n*4/10 || len(mid) > n*6/10 {
			t.Fatalf("half way through the window, %d of %d objects were re-delivered, want about half", len(mid), n)
		}
		now := time.Since(begin)
		changed := storeCM("ns", "cm-299", "2", nil) // its turn is still to come
		if err := inf.apply(w, watchEvent[*corev1.ConfigMap]{Type: "MODIFIED", Object: changed}); err != nil {
			t.Fatal(err)
		}
		if err := inf.apply(w, watchEvent[*corev1.ConfigMap]{Type: "DELETED", Object: storeCM("ns", "cm-298", "3", nil)}); err != nil {
			t.Fatal(err)
		}
		live := snapshot()[len(mid):]
		if len(live) != 2 || live[0].resync || live[0].key != "ns/cm-299" || live[0].at != now || live[1].typ != Deleted || live[1].at != now {
			t.Fatalf("a change and a delete in the window reached the handler as %+v, want both at once (at %v), before the rest of the resync", live, now)
		}

		// After the second resync's window (20 s to 25 s).
		time.Sleep(period + period/2)
		all := snapshot()
		cancel()
		inf.wg.Wait()
		for round, from := range []time.Duration{period, 2 * period} {
			to := from + resync.Window(period)
			count := map[string]int{}
			perInstant := map[time.Duration]int{}
			var first, last time.Duration
			for _, e := range all {
				if !e.resync || e.at < from || e.at >= from+period {
					continue
				}
				if e.at > to {
					t.Errorf("resync %d re-delivered %s at %v, after its window ended at %v", round+1, e.key, e.at, to)
				}
				if len(count) == 0 {
					first = e.at
				}
				last = e.at
				count[e.key]++
				perInstant[e.at]++
				if round == 1 && e.key == "ns/cm-299" && e.rv != "2" {
					t.Errorf("resync 2 re-delivered ns/cm-299 at resourceVersion %s, want its newest state, 2", e.rv)
				}
			}
			// cm-298 was deleted before its turn in resync 1.
			if len(count) != n-1 {
				t.Errorf("resync %d re-delivered %d distinct objects, want %d", round+1, len(count), n-1)
			}
			for key, c := range count {
				if c != 1 {
					t.Errorf("resync %d re-delivered %s %d times, want once", round+1, key, c)
				}
			}
			if count["ns/cm-298"] != 0 {
				t.Errorf("resync %d re-delivered ns/cm-298 after it was deleted", round+1)
			}
			for at, c := range perInstant {
				if c > 1 {
					t.Errorf("resync %d re-delivered %d objects at once (at %v), want one a batch", round+1, c, at)
				}
			}
			if first != from || last < to-resync.Window(period)/10 {
				t.Errorf("resync %d ran from %v to %v, want from %v to near %v", round+1, first, last, from, to)
			}
		}
	})
}

// The cost of starting one resync of 100,000 objects: the sorted snapshot
// of their keys (resyncKeys), taken under the read lock.
func BenchmarkInformer_ResyncKeys_100k(b *testing.B) {
	inf := &Informer[corev1.ConfigMap]{informer[*corev1.ConfigMap]{store: newStore[*corev1.ConfigMap]()}}
	inf.watches = []*watchState{{synced: true}}
	inf.handlers = []*handler[*corev1.ConfigMap]{{}}
	for k := range 100000 {
		inf.store.put(storeCM(fmt.Sprint("ns-", k%100), fmt.Sprint("cm-", k), "1", nil))
	}
	b.ReportAllocs()
	for b.Loop() {
		if keys := inf.resyncKeys(); len(keys) != 100000 {
			b.Fatalf("%d keys, want 100000", len(keys))
		}
	}
}

// resyncer is a cachedInformer that records the period resyncBy sets.
type resyncer struct {
	cachedInformer
	res    Resource
	period time.Duration
}

func (r *resyncer) resource() Resource               { return r.res }
func (r *resyncer) resyncAbout(period time.Duration) { r.period = period }

// resyncBy gives each informer its type's period (ResyncFor's, else
// CacheOptions.Resync), which resyncAbout stretches by at most 10 %
// (TestResyncAbout_StretchesThePeriod), and none for 0.
func TestResyncBy_GivesEachTypeItsPeriod(t *testing.T) {
	c := newCache(nil, CacheOptions{Resync: time.Hour})
	if err := ResyncFor[corev1.Secret](c, 0); err != nil {
		t.Fatal(err)
	}
	if err := ResyncFor[corev1.ConfigMap](c, time.Minute); err != nil {
		t.Fatal(err)
	}
	resourceOf := func(res Resource, err error) Resource {
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, tc := range []struct {
		res      Resource
		min, max time.Duration
	}{
		{resourceOf(ResourceOf[corev1.Pod]()), time.Hour, time.Hour + 6*time.Minute},
		{resourceOf(ResourceOf[corev1.ConfigMap]()), time.Minute, time.Minute + 6*time.Second},
		{resourceOf(ResourceOf[corev1.Secret]()), 0, 0},
	} {
		r := &resyncer{res: tc.res}
		c.resyncBy(r)
		if r.period != tc.min {
			t.Errorf("%s got the period %v, want %v", tc.res, r.period, tc.min)
		}
		inf := &informer[*corev1.Pod]{}
		inf.resyncAbout(r.period)
		if (inf.resync != nil) != (tc.max > 0) {
			t.Errorf("%s: resyncAbout(%v) set the hook: %v, want %v", tc.res, r.period, inf.resync != nil, tc.max > 0)
		}
	}
}

// Issue 25, item 13: an index declared on the Manager, listed by with a
// typed selector whose value may hold "," and "=".
func TestIndexField_DeclaredOnTheManager_ListsByEscapedValue(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	owner := func(cm *corev1.ConfigMap) []string { return []string{cm.Data["owner"]} }
	if err := IndexField(mgr, "data.owner", owner); err != nil {
		t.Fatal(err)
	}
	if err := IndexField(mgr, "data.owner", owner); err == nil || !strings.Contains(err.Error(), `index "data.owner" is already defined`) {
		t.Errorf("a second IndexField of one name = %v, want an error naming it", err)
	}
	if err := IndexField(mgr, "", owner); err == nil {
		t.Error("IndexField with an empty name succeeded")
	}
	cms := ClientFor[corev1.ConfigMap](mgr)
	startManager(t, mgr)
	ctx := t.Context()
	for name, o := range map[string]string{"a": "x=1,y=2", "b": "x=1", "c": "y=2"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"owner": o}}
		if err := cms.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	names := func(sel string) []string {
		t.Helper()
		list, err := cms.List(ctx, ListOptions{Namespace: ns, Fields: sel})
		if err != nil {
			t.Fatalf("List(%q): %v", sel, err)
		}
		var out []string
		for _, cm := range list {
			out = append(out, cm.Name)
		}
		slices.Sort(out)
		return out
	}
	if got := names(MatchingField("data.owner", "x=1,y=2")); !slices.Equal(got, []string{"a"}) {
		t.Errorf("List by owner x=1,y=2 = %v, want [a]", got)
	}
	if got := names(MatchingField("data.owner", "x=1") + "," + MatchingField("metadata.name", "b")); !slices.Equal(got, []string{"b"}) {
		t.Errorf("List by owner x=1 and name b = %v, want [b]", got)
	}
}

// unindexedAgreesWithTheServer lists T with selector from the cache, which
// has no index for it, and checks its error against the real server: it
// suggests Uncached() exactly when an uncached List with the selector
// works, and always IndexField.
func unindexedAgreesWithTheServer[T any, PT Object[T]](t *testing.T, mgr *Manager, ns, selector string) {
	t.Helper()
	c := ClientFor[T, PT](mgr)
	opts := ListOptions{Namespace: ns, Fields: selector}
	got, err := c.List(t.Context(), opts)
	if err == nil {
		t.Errorf("cached List of %s (fields %q) = %d objects, nil; want an error", typeName[T](), selector, len(got))
		return
	}
	if !strings.Contains(err.Error(), "kctl.IndexField(mgr, ") {
		t.Errorf("cached List of %s (fields %q): %v; want it to suggest IndexField", typeName[T](), selector, err)
	}
	suggested := strings.Contains(err.Error(), "or list with Uncached()")
	_, serverErr := c.Uncached().List(t.Context(), opts)
	switch {
	case suggested && serverErr != nil:
		t.Errorf("cached List of %s (fields %q) suggests Uncached(): %v\nbut the server refuses it: %v", typeName[T](), selector, err, serverErr)
	case !suggested && serverErr == nil:
		t.Errorf("cached List of %s (fields %q) does not suggest Uncached(), which works: %v", typeName[T](), selector, err)
	case !suggested && !strings.Contains(err.Error(), "not Uncached()"):
		t.Errorf("cached List of %s (fields %q): %v; want it to say that Uncached() fails too", typeName[T](), selector, err)
	}
}

// Issue 25, item 13: a cached List on a field without an index suggested
// "or list with Uncached()" for every field, though the server knows only
// its field labels (a custom index name is not one). The error now
// suggests Uncached() only where the real server takes the selector.
func TestCachedList_UnindexedField_SuggestsUncachedOnlyWhereTheServerFilters(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	startManager(t, mgr)
	unindexedAgreesWithTheServer[corev1.Pod](t, mgr, ns, "spec.nodeName=n1")
	unindexedAgreesWithTheServer[corev1.Pod](t, mgr, ns, "status.phase=Running,spec.nodeName!=n1")
	unindexedAgreesWithTheServer[corev1.Pod](t, mgr, ns, "spec.nodeName=n1,data.x=y")
	unindexedAgreesWithTheServer[corev1.Pod](t, mgr, ns, MatchingField("spec.owner", "a=b,c"))
	unindexedAgreesWithTheServer[corev1.ConfigMap](t, mgr, ns, "data.owner=me")
	unindexedAgreesWithTheServer[corev1.Secret](t, mgr, ns, "type=Opaque")
	unindexedAgreesWithTheServer[corev1.Service](t, mgr, ns, "spec.type=ClusterIP")
	unindexedAgreesWithTheServer[corev1.Event](t, mgr, ns, "involvedObject.name=x,reason=y")
	unindexedAgreesWithTheServer[corev1.Event](t, mgr, ns, "regarding.name=x")
}

// resyncAbout stretches the period by a random 0-10 % (resync.Jitter), so
// that informers made together do not resync together: each of eight
// informers of one object resyncs it first within [period, 1.1 period],
// and not all of them at period itself.
func TestResyncAbout_StretchesThePeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const period = 10 * time.Second
		ctx, cancel := context.WithCancel(t.Context())
		begin := time.Now()
		var mu sync.Mutex
		first := map[int]time.Duration{} // informer -> its first resync
		var infs []*Informer[corev1.ConfigMap]
		for i := range 8 {
			inf := &Informer[corev1.ConfigMap]{informer[*corev1.ConfigMap]{
				store:     newStore[*corev1.ConfigMap](),
				transform: func(*corev1.ConfigMap) {},
				sharer:    share.New((*corev1.ConfigMap)(nil)),
				log:       slog.New(slog.DiscardHandler),
			}}
			inf.watches = []*watchState{{synced: true}}
			inf.store.put(storeCM("ns", "cm", "1", nil))
			inf.ctx = ctx
			inf.AddHandler(func(e Event[corev1.ConfigMap]) {
				mu.Lock()
				defer mu.Unlock()
				_, seen := first[i]
				if e.Resync && !seen {
					first[i] = time.Since(begin)
				}
			})
			inf.resyncAbout(period)
			inf.mu.Lock()
			inf.goLocked(inf.resync)
			inf.mu.Unlock()
			infs = append(infs, inf)
		}
		time.Sleep(period + period/10 + time.Second)
		synctest.Wait()
		cancel()
		for _, inf := range infs {
			inf.wg.Wait()
		}
		mu.Lock()
		defer mu.Unlock()
		stretched := 0
		for i := range infs {
			at, ok := first[i]
			switch {
			case !ok:
				t.Errorf("informer %d did not resync by %v", i, period+period/10)
			case at < period || at > period+period/10:
				t.Errorf("informer %d resynced first at %v, want within [%v, %v]", i, at, period, period+period/10)
			case at > period:
				stretched++
			}
		}
		if stretched == 0 {
			t.Errorf("every informer resynced first at %v exactly: the period was not stretched", period)
		}
	})
}
