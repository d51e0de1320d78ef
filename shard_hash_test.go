package kctl

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl/internal/controlplane"
	"github.com/kctl-dev/kctl/internal/shardhash"
	"k8s.io/client-go/rest"
)

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
