package mailbox

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// Values pushed before and while Run runs reach fn in order.
func TestBox_RunHandsOnEveryValueInOrder(t *testing.T) {
	b := New[int]()
	b.Push(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []int
	all := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		b.Run(ctx, func(v int) {
			got = append(got, v)
			if len(got) == 1000 {
				close(all)
			}
		})
	})
	for v := 1; v < 1000; v++ {
		b.Push(v)
	}
	select {
	case <-all:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not hand on 1000 values within 10s")
	}
	cancel()
	wg.Wait()
	want := make([]int, 1000)
	for v := range want {
		want[v] = v
	}
	if !slices.Equal(got, want) {
		t.Errorf("Run handed on %v..., want 0..999 in order", got[:5])
	}
	if len(b.pending) != 0 {
		t.Errorf("%d values pending after Run took everything, want 0", len(b.pending))
	}
}

// After ctx ends, Run returns and calls fn with nothing more; Push still
// does not block.
func TestBox_RunStopsWithItsContext(t *testing.T) {
	b := New[string]()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	b.Push("a")
	b.Run(ctx, func(string) { called = true })
	if called {
		t.Error("Run called fn after its ctx ended")
	}
	n := len(b.pending)
	b.Push("b")
	b.Push("c")
	if len(b.pending) != n+2 {
		t.Errorf("%d values pending after two more pushes, want %d: pushes never block nor drop", len(b.pending), n+2)
	}
}
