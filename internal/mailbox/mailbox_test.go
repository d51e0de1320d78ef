package mailbox

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// Values pushed before and while Run runs reach fn in order.
func TestBox_RunHandsOnEveryValueInOrder(t *testing.T) {
	b := New[int]()
	b.Post(0)
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
		b.Post(v)
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

// Once ctx ends, Run calls fn with nothing more, even in the middle of a
// batch, and returns; Post still does not block.
func TestBox_RunStopsWithItsContext(t *testing.T) {
	b := New[string]()
	ctx, cancel := context.WithCancel(context.Background())
	b.Post("a")
	b.Post("b")
	b.Post("c")
	var got []string
	b.Run(ctx, func(v string) {
		got = append(got, v)
		cancel() // ends ctx inside the batch of three
	})
	if !slices.Equal(got, []string{"a"}) {
		t.Errorf("Run handed on %v, want [a]: nothing after its ctx ended", got)
	}
	b.Post("d")
	b.Post("e")
	if len(b.pending) != 2 {
		t.Errorf("%d values pending after two more pushes, want 2: pushes never block nor drop", len(b.pending))
	}
}

// Run lets go of each value fn has had, so that a big object handed to a
// slow handler is not kept alive by the batch it came in.
func TestBox_RunLetsGoOfTheValuesItHandedOn(t *testing.T) {
	b := New[*[1 << 16]byte]()
	ctx, cancel := context.WithCancel(context.Background())
	freed := make(chan struct{})
	big := new([1 << 16]byte)
	runtime.AddCleanup(big, func(ch chan struct{}) { close(ch) }, freed)
	b.Post(big)
	b.Post(nil)
	big = nil
	calls := 0
	b.Run(ctx, func(*[1 << 16]byte) {
		calls++
		if calls < 2 {
			return
		}
		// the second value: the first is no longer referenced by fn
		deadline := time.Now().Add(10 * time.Second)
		for {
			runtime.GC()
			select {
			case <-freed:
				cancel()
				return
			default:
			}
			if time.Now().After(deadline) {
				t.Error("the first value was not freed while Run handed on the second: Run still holds it")
				cancel()
				return
			}
			runtime.Gosched()
		}
	})
}
