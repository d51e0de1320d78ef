package shardhash

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// realNamespaces is 300 namespaces named as clusters name them.
func realNamespaces() []string {
	ns := []string{"default", "kube-system", "kube-public", "monitoring", "logging",
		"ingress-nginx", "cert-manager", "argocd", "team-a", "team-b", "team-c",
		"payments-prod", "payments-staging", "checkout-prod", "checkout-staging",
		"search-prod", "search-staging", "data-platform", "ml-training", "ci"}
	for i := 1; len(ns) < 300; i++ {
		ns = append(ns, fmt.Sprintf("tenant-%04d", i))
	}
	return ns
}

// uuids is n random version-4 uids, as the server makes them.
func uuids(rng *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", rng.Uint32(), rng.Uint32()&0xffff,
			rng.Uint32()&0xfff, 0x8000|rng.Uint32()&0x3fff, rng.Uint64()&0xffffffffffff)
	}
	return out
}

// spread returns the smallest and largest count of keys per member, where
// owner names a key's member.
func spread(keys []string, members []string, owner func(string) string) (lo, hi int) {
	count := map[string]int{}
	for _, k := range keys {
		count[owner(k)]++
	}
	lo = len(keys)
	for _, m := range members {
		lo = min(lo, count[m])
		hi = max(hi, count[m])
	}
	return lo, hi
}

// rangeOwner is the owner of a key hashed into one of len(owners) ranges.
func rangeOwner(owners []string) func(string) string {
	rs := Split(len(owners))
	return func(k string) string {
		h := Sum(k)
		for i, r := range rs {
			if r.Contains(h) {
				return owners[i]
			}
		}
		return ""
	}
}

// The measurement behind the design (go test -v -run Balance): objects by
// uid ranges split within 10 % over 3 members; namespaces by namespace
// hash ranges do not; namespaces by rendezvous on their names (selected as
// exact hash points) do, about as well as their number allows.
func TestBalance_UidRangesSplitNamespaceRangesDoNot(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	members := statefulSet(3)
	owners := Assign(members, 64)
	ids := uuids(rng, 3000)
	lo, hi := spread(ids, members, rangeOwner(owners))
	t.Logf("3,000 uids, 64 ranges, 3 members: %d to %d objects per member (ideal 1,000)", lo, hi)
	if lo < 900 || hi > 1100 {
		t.Errorf("uids: %d to %d per member, want within 10 %% of 1,000", lo, hi)
	}

	nss := realNamespaces()
	eight := make([]string, 8)
	for i := range eight {
		eight[i] = fmt.Sprint(i)
	}
	perRange := map[string]int{}
	top12 := map[uint64]bool{}
	for _, ns := range nss {
		perRange[rangeOwner(eight)(ns)]++
		top12[Sum(ns)>>52] = true
	}
	t.Logf("300 namespaces over Split(8) by namespace hash: %v objects per range; %d distinct top-12-bit values", perRange, len(top12))
	lo, hi = spread(nss, members, rangeOwner(owners))
	t.Logf("300 namespaces, 64 namespace-hash ranges, 3 members: %d to %d per member (ideal 100)", lo, hi)
	used := map[int]bool{}
	for _, ns := range nss {
		used[int(Sum(ns)>>58)] = true
	}
	t.Logf("300 namespaces occupy %d of 64 namespace-hash ranges", len(used))

	pick := func(ns string) string { return Pick(members, ns) }
	lo, hi = spread(nss, members, pick)
	t.Logf("300 namespaces by rendezvous on the name, 3 members: %d to %d per member (ideal 100)", lo, hi)
	if lo < 80 || hi > 120 {
		t.Errorf("namespaces by Pick: %d to %d per member, want within 20 %% of 100", lo, hi)
	}

	// Over many groups (random pod names): how often is each way within
	// 10 % of an equal share, and what is its worst spread?
	within := map[string]int{}
	worst := map[string][2]int{}
	const groups = 200
	for range groups {
		ms := randomNames(rng, 3)
		os := Assign(ms, 64)
		for name, c := range map[string]struct {
			keys  []string
			owner func(string) string
		}{
			"uid ranges":       {ids, rangeOwner(os)},
			"namespace ranges": {nss, rangeOwner(os)},
			"namespace points": {nss, func(ns string) string { return Pick(ms, ns) }},
		} {
			lo, hi := spread(c.keys, ms, c.owner)
			ideal := len(c.keys) / 3
			if lo*10 >= ideal*9 && hi*10 <= ideal*11 {
				within[name]++
			}
			w := worst[name]
			if w == [2]int{} || hi-lo > w[1]-w[0] {
				worst[name] = [2]int{lo, hi}
			}
		}
	}
	for _, name := range []string{"uid ranges", "namespace ranges", "namespace points"} {
		t.Logf("%s, %d groups of 3: %d within 10 %% of an equal share; worst %d to %d",
			name, groups, within[name], worst[name][0], worst[name][1])
	}
	for _, m := range members {
		var points []Range
		for _, ns := range nss {
			if Pick(members, ns) == m {
				points = append(points, Point(Sum(ns)))
			}
		}
		owned := Owned(owners, m)
		t.Logf("%s: uid selector %d ranges merged to %d, %d bytes; namespace-point selector %d points, %d bytes",
			m, len(owned), len(Merge(owned)), len(Selector(FieldUID, owned...)),
			len(points), len(Selector(FieldNamespace, points...)))
	}
	if within["uid ranges"] != groups {
		t.Errorf("uid ranges: only %d of %d groups within 10 %%", within["uid ranges"], groups)
	}
	if within["namespace ranges"] > groups/2 {
		t.Errorf("namespace ranges: %d of %d groups within 10 %%: FNV-1a spreads namespaces after all; revisit the design",
			within["namespace ranges"], groups)
	}
}

// Pick depends only on the set, spreads, and moves only the keys a
// joining member gains.
func TestPick_JoinMovesOnlyTheNewMembersKeys(t *testing.T) {
	nss := realNamespaces()
	before := statefulSet(3)
	after := statefulSet(4)
	gained := 0
	for _, ns := range nss {
		a := Pick(before, ns)
		b := Pick(after, ns)
		if b != Pick([]string{after[3], after[1], after[0], after[2]}, ns) {
			t.Fatalf("Pick(%q) depends on the order of the members", ns)
		}
		if a != b && b != after[3] {
			t.Fatalf("%q moved from %s to %s, not to the new member", ns, a, b)
		}
		if a != b {
			gained++
		}
	}
	t.Logf("3→4 members: the new member takes %d of 300 namespaces (ideal 75)", gained)
	if gained < 50 || gained > 100 {
		t.Errorf("the new member takes %d of 300 namespaces, want about 75", gained)
	}
	if Pick(nil, "x") != "" {
		t.Error("Pick(nil) is not \"\"")
	}
}

// Namespaces put in ranges by Bucket (the hash mixed, then mod the
// number of ranges), the ranges assigned by Assign: 300 realistic names
// over 3 members split about as a binomial draw does (sd ~8 of 100), and
// a member joining moves only the ranges it takes.
func TestBucket_NamespacesSpreadOverAssignedRanges(t *testing.T) {
	nss := realNamespaces()
	members := statefulSet(3)
	owners := Assign(members, 64)
	byBucket := func(ns string) string { return owners[Bucket(ns, 64)] }
	lo, hi := spread(nss, members, byBucket)
	t.Logf("300 namespaces, Bucket over 64 ranges, 3 members: %d to %d per member (ideal 100)", lo, hi)
	if lo < 75 || hi > 125 {
		t.Errorf("namespaces by Bucket: %d to %d per member, want within 25 %% of 100 (3 sd)", lo, hi)
	}
	used := map[int]bool{}
	for _, ns := range nss {
		b := Bucket(ns, 64)
		if b < 0 || b >= 64 {
			t.Fatalf("Bucket(%q, 64) = %d", ns, b)
		}
		used[b] = true
	}
	t.Logf("300 namespaces occupy %d of 64 buckets", len(used))
	if len(used) < 60 {
		t.Errorf("300 namespaces occupy only %d of 64 buckets", len(used))
	}
	if Bucket("x", 0) != 0 {
		t.Error("Bucket(x, 0) is not 0")
	}
}
