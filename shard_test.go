package kctl

// Units of shard.go on a real server: ShardOptions' defaults and checks,
// the server's shard hash and selectors, the probe of ShardSelector, and
// an informer that lists and watches with a shard selector.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/controlplane"
	"github.com/kctl-dev/kctl/internal/shardhash"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

func TestShardOptions_Complete(t *testing.T) {
	old := namespaceFile
	t.Cleanup(func() { namespaceFile = old })
	namespaceFile = t.TempDir() + "/absent"
	got, err := ShardOptions{Group: "podcount", Namespace: "ns"}.complete()
	if err != nil {
		t.Fatal(err)
	}
	if got.Ranges != 64 || got.LeaseDuration != 15*time.Second || got.RenewDeadline != 10*time.Second || got.RenewPeriod != 2*time.Second {
		t.Errorf("defaults: %+v", got)
	}
	if got.Identity == "" || got.Identity != strings.ToLower(got.Identity) {
		t.Errorf("default identity %q: want a lowercase name", got.Identity)
	}
	for _, c := range []struct {
		opts ShardOptions
		want string
	}{
		{ShardOptions{Namespace: "ns"}, "ShardOptions.Group is empty"},
		{ShardOptions{Group: "g"}, "set ShardOptions.Namespace"},
		{ShardOptions{Group: "g", Namespace: "ns", Identity: "Web_0"}, "is not a valid name"},
		{ShardOptions{Group: "g/x", Namespace: "ns", Identity: "a"}, "is not a label value"},
		{ShardOptions{Group: "g", Namespace: "ns", Identity: "a", Ranges: 2000}, "give 1 to 1024"},
		{ShardOptions{Group: "g", Namespace: "ns", Identity: "a", LeaseDuration: 5 * time.Second}, "must be greater than RenewDeadline"},
	} {
		_, err := c.opts.complete()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "kctl: ") {
			t.Errorf("%+v.complete() = %v, want an error saying %q", c.opts, err, c.want)
		}
	}
}

// shardGate is the kube-apiserver flag that serves ListOptions.ShardSelector.
const shardGate = "--feature-gates=ShardedListAndWatch=true"

// testShardedConfig is testConfig for a second control plane of this test
// binary, whose kube-apiserver has the ShardedListAndWatch gate on.
func testShardedConfig(t *testing.T) *rest.Config {
	t.Helper()
	return testLoadConfig(t, controlplane.RequireFlags(t, shardGate).Kubeconfig())
}

// shardListItem is what these tests read of a listed object.
type shardListItem struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		UID       string `json:"uid"`
	} `json:"metadata"`
}

// shardList is a list answer with its shardInfo.
type shardList struct {
	Metadata struct {
		ShardInfo *struct {
			Selector string `json:"selector"`
		} `json:"shardInfo"`
	} `json:"metadata"`
	Items []shardListItem `json:"items"`
}

// testListSharded lists the ConfigMaps labelled run=<run> in every namespace
// with the shard selector sel ("" for none), as namespace/name.
func testListSharded(t *testing.T, cfg *rest.Config, run, sel string) (shardList, []string) {
	t.Helper()
	q := url.Values{"labelSelector": {"kctl-shard-run=" + run}}
	if sel != "" {
		q.Set("shardSelector", sel)
	}
	code, body := testRawRequest(t, cfg, "GET", "/api/v1/configmaps?"+q.Encode(), "")
	if code != 200 {
		t.Fatalf("listing with shardSelector %q: %d %s", sel, code, body)
	}
	var l shardList
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatalf("decoding the list: %v", err)
	}
	keys := make([]string, 0, len(l.Items))
	for _, it := range l.Items {
		keys = append(keys, it.Metadata.Namespace+"/"+it.Metadata.Name)
	}
	slices.Sort(keys)
	return l, keys
}

// testShardObjects creates nsCount namespaces named like a cluster's
// (team-a, payments-prod, tenant-0001 with a random suffix) holding perNS
// ConfigMaps labelled kctl-shard-run=<run> each; it returns run and every
// object listed.
func testShardObjects(t *testing.T, cfg *rest.Config, nsCount, perNS int) (string, []shardListItem) {
	t.Helper()
	first := testNamespace(t, cfg)
	run := first[len(first)-6:]
	bases := []string{"team-a", "payments-prod", "kube-public-x", "monitoring"}
	for i := len(bases); i < nsCount; i++ {
		bases = append(bases, fmt.Sprintf("tenant-%04d", i))
	}
	for _, base := range bases[:nsCount] {
		ns := base + "-" + run
		body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, ns)
		if code, resp := testRawRequest(t, cfg, "POST", "/api/v1/namespaces", body); code != 201 {
			t.Fatalf("creating namespace %s: %d %s", ns, code, resp)
		}
		for j := range perNS {
			cm := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%03d","labels":{"kctl-shard-run":%q}}}`, j, run)
			if code, resp := testRawRequest(t, cfg, "POST", "/api/v1/namespaces/"+ns+"/configmaps", cm); code != 201 {
				t.Fatalf("creating configmap %s/cm-%03d: %d %s", ns, j, code, resp)
			}
		}
	}
	all, _ := testListSharded(t, cfg, run, "")
	if len(all.Items) != nsCount*perNS {
		t.Fatalf("listed %d objects, created %d", len(all.Items), nsCount*perNS)
	}
	return run, all.Items
}

// The client-side hash selects exactly what kube-apiserver 1.36.3 selects,
// by uid and by namespace, for equal ranges, merged ranges and namespace
// points; and the server echoes the selector in shardInfo.
func TestShardHash_SelectsWhatTheServerSelects(t *testing.T) {
	cfg := testShardedConfig(t)
	run, all := testShardObjects(t, cfg, 12, 25)
	field := map[string]func(shardListItem) string{
		shardhash.FieldUID:       func(it shardListItem) string { return it.Metadata.UID },
		shardhash.FieldNamespace: func(it shardListItem) string { return it.Metadata.Namespace },
	}
	eight := shardhash.Split(8)
	cases := [][]shardhash.Range{
		{eight[0]}, {eight[1]}, {eight[2]}, {eight[3]},
		{eight[4]}, {eight[5]}, {eight[6]}, {eight[7]},
		{eight[1], eight[6], eight[7]},
		{{}},
	}
	for _, ns := range []string{all[0].Metadata.Namespace, all[len(all)-1].Metadata.Namespace} {
		cases = append(cases, []shardhash.Range{shardhash.Point(shardhash.Sum(ns))})
	}
	for name, value := range field {
		total := 0
		for i, ranges := range cases {
			sel := shardhash.Selector(name, ranges...)
			var want []string
			for _, it := range all {
				h := shardhash.Sum(value(it))
				for _, r := range ranges {
					if r.Contains(h) {
						want = append(want, it.Metadata.Namespace+"/"+it.Metadata.Name)
						break
					}
				}
			}
			slices.Sort(want)
			l, got := testListSharded(t, cfg, run, sel)
			if !slices.Equal(got, want) {
				t.Errorf("%s: the server selected %d objects, the client-side hash %d:\nserver %v\nclient %v",
					sel, len(got), len(want), got, want)
			}
			if l.Metadata.ShardInfo == nil || l.Metadata.ShardInfo.Selector != sel {
				t.Errorf("%s: shardInfo = %+v, want the selector echoed", sel, l.Metadata.ShardInfo)
			}
			if i < len(eight) {
				total += len(got)
			}
		}
		if total != len(all) {
			t.Errorf("%s: the eight ranges of Split(8) hold %d objects, not all %d", name, total, len(all))
		}
	}
}

// The server rejects what Selector never writes: a short bound. It
// answers 500, not 400 (kube-apiserver 1.36.3), so kctl must never send an
// invalid selector, nor probe with one: a 500 reads as a server failure.
func TestShardHash_ServerRejectsShortBounds(t *testing.T) {
	cfg := testShardedConfig(t)
	q := url.Values{"shardSelector": {"shardRange(object.metadata.uid, '0x0', '0x8000000000000000')"}}
	code, body := testRawRequest(t, cfg, "GET", "/api/v1/configmaps?"+q.Encode(), "")
	if code < 400 || !strings.Contains(string(body), "invalid shard selector") {
		t.Fatalf("a short bound: %d %s, want an error naming the invalid shard selector", code, body)
	}
}

// A selector of 300 namespace points (about 25 KB, as a replica owning a
// third of 900 namespaces by name would send) is accepted and selects
// exactly those namespaces.
func TestShardHash_LongPointSelector(t *testing.T) {
	cfg := testShardedConfig(t)
	run, all := testShardObjects(t, cfg, 6, 2)
	var points []shardhash.Range
	var want []string
	for i, it := range all {
		if i%4 == 0 {
			points = append(points, shardhash.Point(shardhash.Sum(it.Metadata.Namespace)))
		}
	}
	for i := range 300 - len(points) {
		points = append(points, shardhash.Point(shardhash.Sum(fmt.Sprintf("tenant-%04d-absent", i))))
	}
	sel := shardhash.Selector(shardhash.FieldNamespace, points...)
	for _, it := range all {
		for _, p := range points {
			if p.Contains(shardhash.Sum(it.Metadata.Namespace)) {
				want = append(want, it.Metadata.Namespace+"/"+it.Metadata.Name)
				break
			}
		}
	}
	slices.Sort(want)
	_, got := testListSharded(t, cfg, run, sel)
	t.Logf("a selector of %d points, %d bytes: %d objects", len(points), len(sel), len(got))
	if !slices.Equal(got, want) {
		t.Fatalf("the server selected %v, the client-side hash %v", got, want)
	}
}

func testProbeConn(t *testing.T, cfg *rest.Config) *Conn {
	t.Helper()
	conn, err := NewConn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func testResource[T any](t *testing.T) Resource {
	t.Helper()
	res, err := ResourceOf[T]()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// With the gate on, the probe says the selector is served, for core,
// grouped and namespaced resources alike.
func TestProbeShardSelector_GateOn_Served(t *testing.T) {
	conn := testProbeConn(t, testShardedConfig(t))
	for _, res := range []Resource{
		testResource[corev1.ConfigMap](t),
		testResource[appsv1.ReplicaSet](t),
		testResource[coordinationv1.Lease](t),
		testResource[corev1.Namespace](t),
	} {
		served, err := probeShardSelector(t.Context(), conn, res)
		if err != nil || !served {
			t.Errorf("probeShardSelector(%s) = %v, %v; want true, nil", res, served, err)
		}
	}
}

// With the gate off, the server ignores the parameter: not served, no error.
func TestProbeShardSelector_GateOff_NotServed(t *testing.T) {
	conn := testProbeConn(t, testConfig(t))
	res := testResource[corev1.ConfigMap](t)
	served, err := probeShardSelector(t.Context(), conn, res)
	if err != nil || served {
		t.Fatalf("probeShardSelector(%s) = %v, %v; want false, nil", res, served, err)
	}
}

// A replica that may not list cannot tell: an error naming the permission.
func TestProbeShardSelector_Forbidden_ErrorNamesThePermission(t *testing.T) {
	conn := testProbeConn(t, testUnprivilegedConfig(t))
	res := testResource[corev1.ConfigMap](t)
	served, err := probeShardSelector(t.Context(), conn, res)
	if err == nil || served {
		t.Fatalf("probeShardSelector(%s) = %v, %v; want an error", res, served, err)
	}
	for _, want := range []string{"kctl: ", "403", "list on configmaps"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// A probe that fails tells nothing, so /readyz must not claim the
// server-side selector: it did when every probe failed (seen with the
// gate off, on a loaded machine, where probes timed out). The mode says
// "not probed yet" until a probe answers. The failure is injected by
// pointing the Manager's Conn at a loopback port nobody listens on.
func TestShardProbe_Failed_ModeSaysNotProbedYet(t *testing.T) {
	cfg := testConfig(t)
	ns := testNamespace(t, cfg)
	mgr := testManager(t, cfg, ns, Options{})
	run, err := mgr.shard(ShardOptions{Group: "probe", Namespace: ns, Identity: "m-0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := InformerFor[corev1.ConfigMap](mgr.Cache()); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := rest.CopyConfig(cfg)
	dead.Host = "https://" + l.Addr().String()
	l.Close()
	live := mgr.conn
	mgr.conn = testProbeConn(t, dead)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	run.probe(ctx)
	if note := run.note(); !strings.Contains(note, "not probed yet") || strings.Contains(note, "server-side selector") {
		t.Errorf("after a failed probe, the shard note is %q; want \"not probed yet\"", note)
	}
	mgr.conn = live
	run.probe(t.Context())
	if note := run.note(); !strings.Contains(note, "client-side filter: memory not split") {
		t.Errorf("after a probe of the default server, the shard note is %q; want the client-side filter", note)
	}
}

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
// the shard selector sel, set before it runs; paged lists in pages
// instead of the watch-list stream.
func shardInformer(t *testing.T, cfg *rest.Config, ns string, sel string, paged bool) (*Informer[corev1.ConfigMap], *eventRecorder[corev1.ConfigMap]) {
	t.Helper()
	conn := testProbeConn(t, cfg)
	_, logger := newCacheLogs()
	c, inf := configMapInformer(t, conn, ns, logger)
	inf.setShard(sel)
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
			inf, rec := shardInformer(t, cfg, ns, sel, paged)
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
			inf, rec := shardInformer(t, cfg, ns, before, paged)
			if got, want := cachedNames(inf), inRanges(uids, four[0], four[1]); !slices.Equal(got, want) {
				t.Fatalf("synced cache holds %v, want %v", got, want)
			}
			synced := waitDelivered(t, rec, inf)
			inf.setShard(after)
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
