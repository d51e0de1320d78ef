package kctl

// The keys a Queue holds back until a time (AddAfter, Debounce,
// MinInterval): a heap and the one timer that serves it. It locks
// nothing. It uses no other file; queue.go uses it (see the order at
// the top of ratelimit.go).

import (
	"container/heap"
	"time"
)

// queueWait is one key waiting in a queueWaits.
type queueWait[K comparable] struct {
	key K
	// at is when the wait ends.
	at time.Time
	// seq orders waits that end at the same time: the one set first
	// comes first.
	seq uint64
	// add says to queue the key when the wait ends. A wait without add is
	// a hold: it only keeps the key's last start until MinInterval passed.
	add bool
	// low queues the key at low priority when the wait ends (add only).
	low bool
	// index is the wait's position in the heap, kept by Swap.
	index int
}

// queueWaits holds the waiting keys in a binary min-heap on (at, seq),
// as container/heap's PriorityQueue example does, with a map to find
// each key's wait, so that moving or removing a key is O(log n); and a
// timer that calls due when the first wait ends. It is not
// goroutine-safe: its owner locks it, and due takes the owner's lock.
// The zero value is empty; set due before the first set.
type queueWaits[K comparable] struct {
	// heap holds every waiting key once: the waits of byKey.
	heap queueWaitHeap[K]
	// byKey is the wait of every waiting key: byKey[k].key == k.
	byKey map[K]*queueWait[K]
	// seq is the last seq that set gave a wait.
	seq uint64

	// due is what the timer calls: it ends the waits that are due, then
	// calls arm for the next one. A call with none due must be harmless.
	due func()
	// timer calls due. It is made on first use.
	timer *time.Timer
	// armed says the timer calls due at armedAt. While a key waits,
	// armed is set and armedAt is not after the end of the first wait.
	armed   bool
	armedAt time.Time
}

func (w *queueWaits[K]) len() int {
	return len(w.heap)
}

// first is the wait that ends first. Call it only when len() > 0.
func (w *queueWaits[K]) first() queueWait[K] {
	return *w.heap[0]
}

// get returns k's wait, if k waits.
func (w *queueWaits[K]) get(k K) (queueWait[K], bool) {
	e, ok := w.byKey[k]
	if !ok {
		return queueWait[K]{}, false
	}
	return *e, true
}

// set makes k wait until at (to be queued at low priority, if low),
// replacing the wait k had, and arms the
// timer for it. It orders k after every wait set before that ends at
// the same time.
func (w *queueWaits[K]) set(k K, at time.Time, add, low bool, now time.Time) {
	if w.byKey == nil {
		w.byKey = map[K]*queueWait[K]{}
	}
	w.seq++
	e, ok := w.byKey[k]
	if ok {
		e.at = at
		e.seq = w.seq
		e.add = add
		e.low = low
		heap.Fix(&w.heap, e.index)
	} else {
		e = &queueWait[K]{key: k, at: at, seq: w.seq, add: add, low: low}
		heap.Push(&w.heap, e)
		w.byKey[k] = e
	}
	w.arm(at, now)
}

// raise makes k's wait queue it at normal priority, keeping its place.
func (w *queueWaits[K]) raise(k K) {
	e, ok := w.byKey[k]
	if ok {
		e.low = false
	}
}

// arm makes the timer call due at at, unless it does so earlier.
func (w *queueWaits[K]) arm(at time.Time, now time.Time) {
	if w.armed && !w.armedAt.After(at) {
		return
	}
	if w.timer == nil {
		w.timer = time.AfterFunc(at.Sub(now), w.due)
	} else {
		w.timer.Reset(at.Sub(now))
	}
	w.armed = true
	w.armedAt = at
}

// fired records that the timer called due: it is no longer armed.
func (w *queueWaits[K]) fired() {
	w.armed = false
}

// remove ends k's wait, if k waits.
func (w *queueWaits[K]) remove(k K) {
	e, ok := w.byKey[k]
	if !ok {
		return
	}
	heap.Remove(&w.heap, e.index)
	delete(w.byKey, k)
}

// reset removes every wait and stops the timer.
func (w *queueWaits[K]) reset() {
	clear(w.heap)
	w.heap = w.heap[:0]
	clear(w.byKey)
	if w.timer != nil {
		w.timer.Stop()
	}
	w.armed = false
}

// queueWaitHeap implements heap.Interface for queueWaits.
type queueWaitHeap[K comparable] []*queueWait[K]

func (h queueWaitHeap[K]) Len() int {
	return len(h)
}

// Less orders waits by end, then by seq.
func (h queueWaitHeap[K]) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}

func (h queueWaitHeap[K]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *queueWaitHeap[K]) Push(x any) {
	e := x.(*queueWait[K])
	e.index = len(*h)
	*h = append(*h, e)
}

// Pop removes the last wait; heap.Pop and heap.Remove call it.
func (h *queueWaitHeap[K]) Pop() any {
	old := *h
	last := len(old) - 1
	e := old[last]
	old[last] = nil
	*h = old[:last]
	return e
}
