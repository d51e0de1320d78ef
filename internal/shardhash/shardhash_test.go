package shardhash

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
)

// The published FNV-1a 64 test vectors.
func TestSum_KnownVectors(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
	}{
		{"", 0xcbf29ce484222325},
		{"a", 0xaf63dc4c8601ec8c},
		{"foobar", 0x85944171f73967e8},
	} {
		if got := Sum(c.in); got != c.want {
			t.Errorf("Sum(%q) = %#016x, want %#016x", c.in, got, c.want)
		}
	}
}

// Sum is the hash of the server's own code (apimachinery's sharding, which
// kube-apiserver 1.36.3 runs), on names and uids.
func TestSum_MatchesApimachineryHashField(t *testing.T) {
	values := []string{"", "default", "kube-system", "team-a", "payments-prod"}
	for i := range 300 {
		values = append(values, fmt.Sprintf("tenant-%04d", i))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		values = append(values, randomUID(rng))
	}
	for _, v := range values {
		want := apisharding.HashField(v)
		got := fmt.Sprintf("%016x", Sum(v))
		if got != want {
			t.Fatalf("Sum(%q) = %s, want %s", v, got, want)
		}
	}
}

// Contains decides as the server's selector does, at the bounds too.
func TestRange_Contains_MatchesApimachinerySelector(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ranges := append(Split(7), Point(math.MaxUint64), Point(0),
		Range{Start: 1 << 63}, Range{End: 1 << 62})
	for range 50 {
		a := rng.Uint64()
		b := rng.Uint64()
		ranges = append(ranges, Range{Start: min(a, b), End: max(a, b)})
	}
	for _, r := range ranges {
		sel := apisharding.NewSelector(apisharding.ShardRangeRequirement{
			Key: FieldUID, Start: hex(r.Start), End: endHex(r.End)})
		for range 200 {
			uid := randomUID(rng)
			checkSame(t, r, sel, uid)
		}
		checkSame(t, r, sel, uidHashing(t, r.Start))
	}
}

// checkSame fails t unless r and sel agree on an object with uid.
func checkSame(t *testing.T, r Range, sel apisharding.Selector, uid string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}
	want, err := sel.Matches(pod)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Contains(Sum(uid)); got != want {
		t.Fatalf("%v.Contains(Sum(%q)) = %v, the server's selector says %v", r, uid, got, want)
	}
}

// uidHashing returns a value hashing to h when one is cheap to find: the
// FNV-1a of a single byte b is (offset^b)*prime, so only for such h; else
// a random uid. It exercises the bound itself where it can.
func uidHashing(t *testing.T, h uint64) string {
	t.Helper()
	for b := range 256 {
		s := string([]byte{byte(b)})
		if Sum(s) == h {
			return s
		}
	}
	return "not-a-bound"
}

func randomUID(rng *rand.Rand) string {
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", rng.Uint32(), rng.Uint32()&0xffff,
		rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff)
}

func TestSplit_CoversTheSpaceInEqualContiguousRanges(t *testing.T) {
	if got := Split(1); len(got) != 1 || got[0] != (Range{}) {
		t.Fatalf("Split(1) = %v, want the whole space", got)
	}
	if got := Split(0); len(got) != 1 || got[0] != (Range{}) {
		t.Fatalf("Split(0) = %v, want the whole space", got)
	}
	four := Split(4)
	want := []Range{{0, 1 << 62}, {1 << 62, 1 << 63}, {1 << 63, 3 << 62}, {3 << 62, 0}}
	for i := range want {
		if four[i] != want[i] {
			t.Fatalf("Split(4)[%d] = %v, want %v", i, four[i], want[i])
		}
	}
	for _, n := range []int{3, 7, 64, 1000} {
		rs := Split(n)
		if rs[0].Start != 0 || rs[n-1].End != 0 {
			t.Fatalf("Split(%d) does not span the space: %v .. %v", n, rs[0], rs[n-1])
		}
		first := rs[0].End - rs[0].Start
		for i := 1; i < n; i++ {
			if rs[i].Start != rs[i-1].End {
				t.Fatalf("Split(%d): range %d starts at %#x, range %d ends at %#x", n, i, rs[i].Start, i-1, rs[i-1].End)
			}
			size := rs[i].End - rs[i].Start // wraps to the right size for End 0
			if size != first && size != first+1 && size+1 != first {
				t.Fatalf("Split(%d): range %d has size %d, range 0 %d", n, i, size, first)
			}
		}
	}
}

func TestSelector_WritesMergedSixteenDigitBounds(t *testing.T) {
	for _, c := range []struct {
		name   string
		field  string
		ranges []Range
		want   string
	}{
		{"whole space", FieldUID, []Range{{}},
			"shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"},
		{"one of four", FieldUID, Split(4)[1:2],
			"shardRange(object.metadata.uid, '0x4000000000000000', '0x8000000000000000')"},
		{"touching ranges merge, out of order", FieldUID, []Range{Split(4)[3], Split(4)[2]},
			"shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"},
		{"apart ranges stay apart", FieldNamespace, []Range{Split(4)[3], Split(4)[0]},
			"shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000') || " +
				"shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')"},
		{"a point", FieldNamespace, []Range{Point(0xab)},
			"shardRange(object.metadata.namespace, '0x00000000000000ab', '0x00000000000000ac')"},
		{"the top point", FieldNamespace, []Range{Point(math.MaxUint64)},
			"shardRange(object.metadata.namespace, '0xffffffffffffffff', '0x10000000000000000')"},
		{"overlap and containment", FieldUID, []Range{{10, 20}, {15, 30}, {12, 13}, {40, 50}},
			"shardRange(object.metadata.uid, '0x000000000000000a', '0x000000000000001e') || " +
				"shardRange(object.metadata.uid, '0x0000000000000028', '0x0000000000000032')"},
		{"nothing", FieldUID, nil, ""},
		{"only empty ranges", FieldUID, []Range{{5, 5}, {9, 3}}, ""},
	} {
		if got := Selector(c.field, c.ranges...); got != c.want {
			t.Errorf("%s: Selector(%v) =\n%s\nwant\n%s", c.name, c.ranges, got, c.want)
		}
	}
}

func TestMerge_KeepsTheSetOfHashes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 100 {
		var rs []Range
		for range rng.IntN(6) {
			a := rng.Uint64N(1000)
			rs = append(rs, Range{Start: a, End: a + rng.Uint64N(100)})
		}
		merged := Merge(rs)
		for h := uint64(0); h < 1200; h++ {
			in := false
			for _, r := range rs {
				in = in || r.Contains(h)
			}
			out := false
			for _, r := range merged {
				out = out || r.Contains(h)
			}
			if in != out {
				t.Fatalf("Merge(%v) = %v: hash %d in the input %v, in the output %v", rs, merged, h, in, out)
			}
		}
		for i := 1; i < len(merged); i++ {
			if merged[i-1].End >= merged[i].Start {
				t.Fatalf("Merge(%v) = %v: ranges %d and %d touch", rs, merged, i-1, i)
			}
		}
	}
}
