// Package keywait holds the keys kctl's Queue holds back until a time
// (AddAfter, AddRateLimited, Debounce, MinInterval): a binary min-heap
// and the one timer that serves it, as client-go's delaying queue has.
// A Waits is not goroutine-safe: the Queue calls it with its lock held,
// and its timer calls Fire, which takes that lock.
package keywait

import (
	"container/heap"
	"fmt"
	"iter"
	"time"
)

// Wait is one key waiting in a Waits.
type Wait[K comparable] struct {
	Key K
	// At is when the wait ends.
	At time.Time
	// Add says to queue the key when the wait ends. A wait without Add
	// is a hold: it only keeps the key's last start until MinInterval
	// passed.
	Add bool
	// Low queues the key at low priority when the wait ends (Add only).
	Low bool
	// NotBefore is the end of the key's MinInterval: its owner queues it
	// no earlier. A hold sets it (to its At), on the key's wait to add if
	// there is one; a wait to add that replaces a hold keeps it.
	NotBefore time.Time
	// seq orders waits that end at the same time: the one set first
	// comes first.
	seq uint64
	// index is the wait's position in the heap, kept by Swap.
	index int
}

// Waits holds the waiting keys in a binary min-heap on (At, seq), as
// container/heap's PriorityQueue example does, with a map to find each
// key's wait, so that moving or removing a key is O(log n); and a timer
// that calls Fire when the first wait ends. The zero value is empty; set
// Fire before the first Set.
type Waits[K comparable] struct {
	// Fire is what the timer calls, with no lock held: it ends the waits
	// that are due (Due). A call with none due must be harmless.
	Fire func()

	// heap holds every waiting key once: the waits of byKey.
	heap waitHeap[K]
	// byKey is the wait of every waiting key: byKey[k].Key == k.
	byKey map[K]*Wait[K]
	// seq is the last seq that Set gave a wait.
	seq uint64
	// timer calls Fire. It is made on first use.
	timer *time.Timer
	// armed says the timer calls Fire at armedAt. While a key waits,
	// armed is set and armedAt is not after the end of the first wait.
	armed   bool
	armedAt time.Time
}

// Len is the number of waiting keys.
func (w *Waits[K]) Len() int {
	return len(w.heap)
}

// Get returns k's wait, if k waits.
func (w *Waits[K]) Get(k K) (Wait[K], bool) {
	e, ok := w.byKey[k]
	if !ok {
		return Wait[K]{}, false
	}
	return *e, true
}

// Set makes k wait until at; with add, to be queued then (at low
// priority if low), else only held. A wait to add never moves later, nor
// becomes a hold: such a Set only raises it to normal priority, if add
// and not low; a wait at normal priority never becomes low. A hold sets
// the wait's NotBefore. A Set orders k after every wait set before that
// ends at the same time, and arms the timer for it.
func (w *Waits[K]) Set(k K, at time.Time, add, low bool, now time.Time) {
	e, ok := w.byKey[k]
	if ok && !add {
		e.NotBefore = at
	}
	if ok && e.Add && (!add || !at.Before(e.At)) {
		if add && !low {
			e.Low = false
		}
		return
	}
	if ok && e.Add && !e.Low {
		low = false
	}
	if w.byKey == nil {
		w.byKey = map[K]*Wait[K]{}
	}
	w.seq++
	if ok {
		e.At = at
		e.seq = w.seq
		e.Add = add
		e.Low = low
		heap.Fix(&w.heap, e.index)
	} else {
		e = &Wait[K]{Key: k, At: at, seq: w.seq, Add: add, Low: low}
		if !add {
			e.NotBefore = at
		}
		heap.Push(&w.heap, e)
		w.byKey[k] = e
	}
	w.arm(at, now)
}

// Remove ends k's wait, if k waits.
func (w *Waits[K]) Remove(k K) {
	e, ok := w.byKey[k]
	if !ok {
		return
	}
	heap.Remove(&w.heap, e.index)
	delete(w.byKey, k)
}

// Due ends the waits that are due at now and yields each, in order;
// then it arms the timer for the first wait left. Fire calls it: the
// timer that called Fire is no longer armed. The loop over it may Set
// and Remove waits.
func (w *Waits[K]) Due(now time.Time) iter.Seq[Wait[K]] {
	return func(yield func(Wait[K]) bool) {
		w.armed = false
		for len(w.heap) > 0 && !w.heap[0].At.After(now) {
			e := *w.heap[0]
			w.Remove(e.Key)
			if !yield(e) {
				break
			}
		}
		if len(w.heap) > 0 {
			w.arm(w.heap[0].At, now)
		}
	}
}

// Reset removes every wait and stops the timer.
func (w *Waits[K]) Reset() {
	clear(w.heap)
	w.heap = w.heap[:0]
	clear(w.byKey)
	if w.timer != nil {
		w.timer.Stop()
	}
	w.armed = false
}

// arm makes the timer call Fire at at, unless it does so earlier.
func (w *Waits[K]) arm(at time.Time, now time.Time) {
	if w.armed && !w.armedAt.After(at) {
		return
	}
	if w.timer == nil {
		w.timer = time.AfterFunc(at.Sub(now), w.Fire)
	} else {
		w.timer.Reset(at.Sub(now))
	}
	w.armed = true
	w.armedAt = at
}

// All is every wait, in heap order: for a test of its user's
// invariants.
func (w *Waits[K]) All() iter.Seq[Wait[K]] {
	return func(yield func(Wait[K]) bool) {
		for _, e := range w.heap {
			if !yield(*e) {
				return
			}
		}
	}
}

// Check reports a broken invariant of w (heap order, the map, the
// timer), or nil: for tests.
func (w *Waits[K]) Check() error {
	if len(w.byKey) != len(w.heap) {
		return fmt.Errorf("%d waiting keys are mapped, %d are in the heap", len(w.byKey), len(w.heap))
	}
	for i, e := range w.heap {
		if i > 0 && w.heap.Less(i, (i-1)/2) {
			return fmt.Errorf("waiting heap order broken at %d", i)
		}
		if e.index != i || w.byKey[e.Key] != e {
			return fmt.Errorf("heap[%d] is %v, at index %d, mapped to %p, not %p", i, e.Key, e.index, w.byKey[e.Key], e)
		}
	}
	if len(w.heap) > 0 && (!w.armed || w.armedAt.After(w.heap[0].At)) {
		return fmt.Errorf("timer armed=%v at %v, but the first wait ends at %v", w.armed, w.armedAt, w.heap[0].At)
	}
	return nil
}

// waitHeap implements heap.Interface for Waits.
type waitHeap[K comparable] []*Wait[K]

func (h waitHeap[K]) Len() int {
	return len(h)
}

// Less orders waits by end, then by seq.
func (h waitHeap[K]) Less(i, j int) bool {
	if h[i].At.Equal(h[j].At) {
		return h[i].seq < h[j].seq
	}
	return h[i].At.Before(h[j].At)
}

func (h waitHeap[K]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *waitHeap[K]) Push(x any) {
	e := x.(*Wait[K])
	e.index = len(*h)
	*h = append(*h, e)
}

// Pop removes the last wait; heap.Pop and heap.Remove call it.
func (h *waitHeap[K]) Pop() any {
	old := *h
	last := len(old) - 1
	e := old[last]
	old[last] = nil
	*h = old[:last]
	return e
}
