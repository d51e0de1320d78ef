package kctl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// On a member of a shard group, read-your-writes holds in the namespaces
// of the ranges it serves: an Update, a Patch and a Create through
// ClientFor are seen at once by a cached Get and List, round after
// round. A write to an object of a namespace the other member serves is
// not covered (this member's cache never holds it): the cached Get
// answers at once, not found, without waiting for it.
func TestShardReadYourWrites_ServedNamespace_ReadsSeeTheWriteAtOnce(t *testing.T) {
	cfg := testShardedConfig(t)
	leaseNS := testNamespace(t, cfg)
	run := strings.ToLower(randomSuffix())
	var nss []string
	for i := range 8 {
		nss = append(nss, fmt.Sprintf("ryw-%s-%d", run, i))
	}
	createNamespaces(t, fixtureConn(t, cfg), nss)
	fixture := NewClient[corev1.ConfigMap](fixtureConn(t, cfg))
	for _, ns := range nss {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}}
		if err := fixture.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
	}
	cms := map[string]*Client[corev1.ConfigMap]{}
	var ms []*shardMember
	for _, id := range []string{"r-0", "r-1"} {
		m := startMemberWith(t, cfg, leaseNS, id, testShardLease, testShardRenew, func(mgr *Manager) {
			cms[id] = ClientFor[corev1.ConfigMap](mgr)
		})
		ms = append(ms, m)
	}
	waitServing(t, ms)
	a, other := ms[0], cms["r-0"]
	var mine, theirs []string
	for _, ns := range nss {
		if a.run.owns(Key{ns, "cm"}) {
			mine = append(mine, ns)
		} else {
			theirs = append(theirs, ns)
		}
	}
	t.Logf("r-0 serves %d of the test's namespaces, r-1 %d", len(mine), len(theirs))
	if len(mine) == 0 || len(theirs) == 0 {
		t.Fatalf("r-0 serves %v of %v: want some, not all", mine, nss)
	}
	ctx := t.Context()
	stale := 0
	for _, ns := range mine {
		for i := range 5 {
			round := strconv.Itoa(i)
			cm, err := other.Get(ctx, ns, "cm")
			if err != nil {
				t.Fatal(err)
			}
			cm.Data = map[string]string{"round": round}
			if err := other.Update(ctx, cm); err != nil {
				t.Fatal(err)
			}
			got, err := other.Get(ctx, ns, "cm")
			if err != nil {
				t.Fatal(err)
			}
			if got.Data["round"] != round {
				stale++
				t.Errorf("%s: after Update round %s, a cached Get read round %q (resourceVersion %s, written %s)",
					ns, round, got.Data["round"], got.ResourceVersion, cm.ResourceVersion)
			}

			patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"round":%q}}}`, round))
			target := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}}
			if err := other.Patch(ctx, target, MergePatch, patch, PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			list, err := other.List(ctx, ListOptions{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(list, func(cm *corev1.ConfigMap) bool { return cm.Name == "cm" })
			if i < 0 || list[i].Annotations["round"] != round {
				stale++
				t.Errorf("%s: after Patch round %s, a cached List of %d objects did not read the patch", ns, round, len(list))
			}

			made := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "made-" + round}}
			if err := other.Create(ctx, made); err != nil {
				t.Fatal(err)
			}
			if _, err := other.Get(ctx, ns, made.Name); err != nil {
				stale++
				t.Errorf("%s: after Create, a cached Get: %v", ns, err)
			}
		}
	}
	t.Logf("%d of %d reads did not see the write before them", stale, 15*len(mine))

	// Not covered: another member's namespace. Not waited for either.
	for _, ns := range theirs {
		patch := []byte(`{"metadata":{"annotations":{"written-by":"r-0"}}}`)
		target := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}}
		if err := other.Patch(ctx, target, MergePatch, patch, PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		_, err := other.Get(ctx, ns, "cm")
		took := time.Since(began)
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s (served by r-1): a cached Get on r-0: %v, want not found", ns, err)
		}
		if took > time.Second {
			t.Errorf("%s (served by r-1): a cached Get on r-0 took %v: it waited for a write its cache never holds", ns, took)
		}
		if _, err := other.List(ctx, ListOptions{}); err != nil {
			t.Errorf("a cached List of every namespace on r-0: %v", err)
		}
	}
}
