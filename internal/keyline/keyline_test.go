package keyline

import (
	"slices"
	"testing"
	"time"
)

// popAll pops every key of l; n keys are in it.
func popAll[K comparable](l Line[K], n int) []K {
	var ks []K
	for range n {
		k, _ := l.Pop()
		ks = append(ks, k)
	}
	return ks
}

func TestFIFO_PopsInPushOrderWhateverThePriority(t *testing.T) {
	var l FIFO[string]
	t0 := time.Unix(0, 0)
	l.Push("a", true, t0)
	l.Push("b", false, t0)
	if l.Raise("a", t0, t0) {
		t.Errorf("a FIFO raised a key")
	}
	if got := popAll[string](&l, 2); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("popped %q, want a, b", got)
	}
}

func TestPriority_LowKeysGoAfterNormalOnesUntilTheyAge(t *testing.T) {
	t0 := time.Unix(0, 0)
	var f FIFO[string]
	f.Push("a", false, t0)
	l := NewPriority(&f, time.Minute)
	l.Push("low1", true, t0)
	l.Push("low2", true, t0)
	l.Push("b", false, t0.Add(time.Second))
	if !l.Raise("low2", t0, t0.Add(2*time.Second)) {
		t.Fatalf("a low key that has not aged was not raised")
	}
	l.Push("late", false, t0.Add(2*time.Minute)) // after low1 aged
	normal, low := Keys[string](l)
	if !slices.Equal(normal, []string{"a", "b", "low2", "late"}) || !slices.Equal(low, []string{"low1"}) {
		t.Fatalf("Keys = %q, %q", normal, low)
	}
	got := popAll[string](l, 5)
	want := []string{"a", "b", "low2", "low1", "late"}
	if !slices.Equal(got, want) {
		t.Errorf("popped %q, want %q", got, want)
	}
	if l.Raise("x", t0, t0.Add(time.Minute)) {
		t.Errorf("a key that aged was raised")
	}
}
