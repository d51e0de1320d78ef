package shardhash

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// statefulSet is the names of n replicas of a StatefulSet "podcount".
func statefulSet(n int) []string {
	ms := make([]string, n)
	for i := range ms {
		ms[i] = fmt.Sprintf("podcount-%d", i)
	}
	return ms
}

// randomNames is n Deployment-like pod names.
func randomNames(rng *rand.Rand, n int) []string {
	const letters = "bcdfghjklmnpqrstvwxz2456789"
	ms := make([]string, n)
	for i := range ms {
		b := []byte("podcount-7d9f8b6c5-")
		for range 5 {
			b = append(b, letters[rng.IntN(len(letters))])
		}
		ms[i] = string(b)
	}
	return ms
}

func loads(owners []string) map[string]int {
	l := map[string]int{}
	for _, o := range owners {
		l[o]++
	}
	return l
}

// Every range has an owner, and every member owns ⌊n/m⌋ or ⌈n/m⌉ ranges,
// for StatefulSet names and random names alike.
func TestAssign_EveryMemberOwnsAnEqualShare(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for m := 1; m <= 12; m++ {
		for _, members := range [][]string{statefulSet(m), randomNames(rng, m)} {
			for _, n := range []int{16, 64, 100} {
				owners := Assign(members, n)
				l := loads(owners)
				if len(l) != m {
					t.Fatalf("Assign(%v, %d): %d owners, want %d", members, n, len(l), m)
				}
				for who, k := range l {
					if !slices.Contains(members, who) || k < n/m || k > (n+m-1)/m {
						t.Fatalf("Assign(%v, %d): %q owns %d ranges, want %d or %d", members, n, who, k, n/m, (n+m-1)/m)
					}
				}
			}
		}
	}
	if got := Assign(nil, 3); !slices.Equal(got, []string{"", "", ""}) {
		t.Fatalf("Assign(nil, 3) = %q, want no owners", got)
	}
}

// Members that agree on the set agree on the owners, whatever its order.
func TestAssign_DependsOnlyOnTheSet(t *testing.T) {
	a := Assign([]string{"c", "a", "b"}, 64)
	b := Assign([]string{"b", "c", "a", "a"}, 64)
	if !slices.Equal(a, b) {
		t.Fatalf("Assign differs with the order of the members:\n%v\n%v", a, b)
	}
}

// moved counts the ranges whose owner differs.
func moved(a, b []string) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// A member joining takes about 1/(m+1) of the ranges, and the others keep
// the rest; a member leaving hands over its own and few others. Measured
// over many groups of random names and StatefulSets; the figures are in
// the log (go test -v -run Moves).
func TestAssign_JoinOrLeave_MovesAboutOneNth(t *testing.T) {
	const n = 64
	rng := rand.New(rand.NewPCG(9, 10))
	for m := 1; m <= 8; m++ {
		trials := 300
		sumJoin, maxJoin := 0, 0
		sumLeave, maxLeave := 0, 0
		for trial := range trials {
			group := randomNames(rng, m+1)
			if trial == 0 {
				group = statefulSet(m + 1)
			}
			before := Assign(group[:m], n)
			after := Assign(group, n)
			k := moved(before, after)
			sumJoin += k
			maxJoin = max(maxJoin, k)
			// the last one leaves: after → before
			leaving := group[m]
			own := loads(after)[leaving]
			extra := moved(after, before) - own
			sumLeave += extra
			maxLeave = max(maxLeave, extra)
		}
		ideal := float64(n) / float64(m+1)
		meanJoin := float64(sumJoin) / float64(trials)
		t.Logf("%d→%d members, %d ranges: a join moves %.1f ranges on average (ideal %.1f), at most %d; "+
			"a leave moves besides the leaver's own %.1f on average, at most %d",
			m, m+1, n, meanJoin, ideal, maxJoin, float64(sumLeave)/float64(trials), maxLeave)
		if meanJoin > 1.6*ideal {
			t.Errorf("%d→%d members: a join moves %.1f ranges on average, more than 1.6 × the ideal %.1f", m, m+1, meanJoin, ideal)
		}
	}
}

// Owned lists a member's ranges, and together they cover the space once.
func TestOwned_CoversTheSpaceOnce(t *testing.T) {
	owners := Assign(statefulSet(3), 64)
	seen := 0
	for _, m := range statefulSet(3) {
		for _, r := range Owned(owners, m) {
			for _, h := range []uint64{r.Start, r.Start + (r.End-r.Start)/2} {
				if owners[int(h>>58)] != m {
					t.Fatalf("%s owns %v, but hash %#x is range %d's, owned by %s", m, r, h, h>>58, owners[h>>58])
				}
			}
			seen++
		}
	}
	if seen != 64 {
		t.Fatalf("the members own %d ranges in all, want 64", seen)
	}
}
