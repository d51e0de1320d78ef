package kctl

import (
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/shardhash"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// shardCMs creates n ConfigMaps named <prefix>-000... in ns and returns
// each one's uid by name.
func shardCMs(t *testing.T, cms *Client[corev1.ConfigMap], ns, prefix string, n int) map[string]string {
	t.Helper()
	uids := map[string]string{}
	for j := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      fmt.Sprintf("%s-%03d", prefix, j),
		}}
		if err := cms.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		uids[cm.Name] = string(cm.UID)
	}
	return uids
}

// shardInformer starts a cache on cfg holding the ConfigMaps of ns with
// the shard selector that sel holds at each list and watch; paged lists
// in pages instead of the watch-list stream.
func shardInformer(t *testing.T, cfg *rest.Config, ns string, sel *atomic.Pointer[string], paged bool) (*Informer[corev1.ConfigMap], *eventRecorder[corev1.ConfigMap]) {
	t.Helper()
	conn := testProbeConn(t, cfg)
	_, logger := newCacheLogs()
	c, inf := configMapInformer(t, conn, ns, logger)
	inf.shard = func() string { return *sel.Load() }
	if paged {
		inf.stream = nil
	}
	rec := &eventRecorder[corev1.ConfigMap]{}
	inf.AddHandler(rec.handle)
	startCache(t, c)
	if err := inf.WaitForSync(t.Context()); err != nil {
		t.Fatal(err)
	}
	return inf, rec
}

// inRanges lists the names whose uid hashes into one of ranges, sorted.
func inRanges(uids map[string]string, ranges ...shardhash.Range) []string {
	var names []string
	for name, uid := range uids {
		h := shardhash.Sum(uid)
		if slices.ContainsFunc(ranges, func(r shardhash.Range) bool { return r.Contains(h) }) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// cachedNames lists the names of inf's objects, sorted.
func cachedNames(inf *Informer[corev1.ConfigMap]) []string {
	objs, _ := inf.List(ListOptions{})
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		names = append(names, o.Name)
	}
	slices.Sort(names)
	return names
}

// modelNames replays rec's events and lists the names they leave stored,
// failing the test on an impossible event.
func modelNames(t *testing.T, rec *eventRecorder[corev1.ConfigMap]) []string {
	t.Helper()
	model, wrong := replayEvents(rec.all())
	if len(wrong) > 0 {
		t.Fatalf("impossible events: %v", wrong)
	}
	names := make([]string, 0, len(model))
	for name := range model {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// With a shard selector of half the uid space, the informer (listing with
// the watch-list stream or in pages) holds exactly the objects whose uid
// hashes into that half, and follows creations and deletions in it, never
// hearing of the others.
func TestShardInformer_HoldsItsHalf(t *testing.T) {
	cfg := testShardedConfig(t)
	half := shardhash.Split(2)[0]
	sel := shardhash.Selector(shardhash.FieldUID, half)
	for _, paged := range []bool{false, true} {
		t.Run(fmt.Sprintf("paged=%v", paged), func(t *testing.T) {
			ns := testNamespace(t, cfg)
			cms := NewClient[corev1.ConfigMap](testProbeConn(t, cfg))
			uids := shardCMs(t, cms, ns, "before", 40)
			var cur atomic.Pointer[string]
			cur.Store(&sel)
			inf, rec := shardInformer(t, cfg, ns, &cur, paged)
			want := inRanges(uids, half)
			if got := cachedNames(inf); !slices.Equal(got, want) {
				t.Fatalf("synced cache holds %v, want %v (of %d)", got, want, len(uids))
			}
			for name, uid := range shardCMs(t, cms, ns, "after", 40) {
				uids[name] = uid
			}
			gone := want[0]
			if err := cms.Delete(t.Context(), ns, gone); err != nil {
				t.Fatal(err)
			}
			delete(uids, gone)
			want = inRanges(uids, half)
			eventually(t, "the cache to follow its half", func() bool {
				return slices.Equal(cachedNames(inf), want)
			})
			waitEventsLeave(t, rec, want)
		})
	}
}

// When the selector changes from ranges 0-1 to ranges 1-2 of four, a
// reshard lists again: the objects of range 0 leave the cache with
// Deleted events, those of range 2 arrive with Added ones, those of range
// 1 stay unreported, and objects created meanwhile are not lost.
func TestShardInformer_ReshardMovesObjects(t *testing.T) {
	cfg := testShardedConfig(t)
	four := shardhash.Split(4)
	before := shardhash.Selector(shardhash.FieldUID, four[0], four[1])
	after := shardhash.Selector(shardhash.FieldUID, four[1], four[2])
	for _, paged := range []bool{false, true} {
		t.Run(fmt.Sprintf("paged=%v", paged), func(t *testing.T) {
			ns := testNamespace(t, cfg)
			cms := NewClient[corev1.ConfigMap](testProbeConn(t, cfg))
			uids := shardCMs(t, cms, ns, "old", 60)
			var cur atomic.Pointer[string]
			cur.Store(&before)
			inf, rec := shardInformer(t, cfg, ns, &cur, paged)
			if got, want := cachedNames(inf), inRanges(uids, four[0], four[1]); !slices.Equal(got, want) {
				t.Fatalf("synced cache holds %v, want %v", got, want)
			}
			synced := waitDelivered(t, rec, inf)
			cur.Store(&after)
			inf.reshard()
			for name, uid := range shardCMs(t, cms, ns, "new", 20) {
				uids[name] = uid
			}
			want := inRanges(uids, four[1], four[2])
			eventually(t, "the cache to hold ranges 1-2", func() bool {
				return slices.Equal(cachedNames(inf), want)
			})
			waitEventsLeave(t, rec, want)
			// What each old object must be told after the reshard.
			told := map[string][]EventType{}
			for _, name := range inRanges(uids, four[0]) {
				told[name] = []EventType{Deleted}
			}
			for _, name := range inRanges(uids, four[1]) {
				told[name] = nil
			}
			for _, name := range inRanges(uids, four[2]) {
				told[name] = []EventType{Added}
			}
			got := map[string][]EventType{}
			for _, e := range rec.all()[synced:] {
				got[e.Object.Name] = append(got[e.Object.Name], e.Type)
			}
			for name, want := range told {
				if name[:3] == "old" && !slices.Equal(got[name], want) {
					t.Errorf("%s was told %v after the reshard, want %v", name, got[name], want)
				}
			}
		})
	}
}

// waitDelivered waits until rec has seen one event per object that inf
// holds (each was only Added so far: handlers run after the store) and
// returns how many it has seen.
func waitDelivered(t *testing.T, rec *eventRecorder[corev1.ConfigMap], inf *Informer[corev1.ConfigMap]) int {
	t.Helper()
	n := len(cachedNames(inf))
	eventually(t, "the handler to see every cached object", func() bool {
		return len(rec.all()) == n
	})
	return n
}

// waitEventsLeave waits until replaying rec's events leaves exactly the
// objects named in want: the handler sees an event after the store has
// it, so the events may lag the cache a little, never more.
func waitEventsLeave(t *testing.T, rec *eventRecorder[corev1.ConfigMap], want []string) {
	t.Helper()
	got := modelNames(t, rec)
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Equal(got, want) {
		if time.Now().After(deadline) {
			t.Fatalf("events leave %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
		got = modelNames(t, rec)
	}
}

// configMapInformer makes a new cache on conn, logging to logger, and in
// it the informer of ns's ConfigMaps; neither runs yet.
func configMapInformer(t *testing.T, conn *Conn, ns string, logger *slog.Logger) (*Cache, *Informer[corev1.ConfigMap]) {
	t.Helper()
	c := NewCache(conn, CacheOptions{Logger: logger})
	if err := ScopeFor[corev1.ConfigMap](c, Scope{Namespaces: []string{ns}}); err != nil {
		t.Fatal(err)
	}
	inf, err := InformerFor[corev1.ConfigMap](c)
	if err != nil {
		t.Fatal(err)
	}
	return c, inf
}
