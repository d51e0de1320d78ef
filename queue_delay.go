package kctl

// The keys a Queue holds back until a time (AddAfter, Debounce,
// MinInterval): a heap and the one timer that serves it. It locks
// nothing. It uses no other file; queue.go uses it (see the order at
// the top of ratelimit.go).

import "time"

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
}

// queueWaits is a binary min-heap of waiting keys on (at, seq), with
// each key's position, so that moving or removing a key is O(log n),
// and a timer that calls due when the first wait ends. It is not
// goroutine-safe: its owner locks it, and due takes the owner's lock.
// The zero value is empty; set due before the first set.
type queueWaits[K comparable] struct {
	// heap holds every waiting key once. No wait comes before its parent:
	// heap[i] is not before heap[(i-1)/2].
	heap []queueWait[K]
	// pos is the index in heap of every waiting key, and only of them:
	// heap[pos[k]].key == k.
	pos map[K]int
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
	return w.heap[0]
}

// get returns k's wait, if k waits.
func (w *queueWaits[K]) get(k K) (queueWait[K], bool) {
	i, ok := w.pos[k]
	if !ok {
		return queueWait[K]{}, false
	}
	return w.heap[i], true
}

// set makes k wait until at, replacing the wait k had, and arms the
// timer for it. It orders k after every wait set before that ends at
// the same time.
func (w *queueWaits[K]) set(k K, at time.Time, add bool, now time.Time) {
	if w.pos == nil {
		w.pos = map[K]int{}
	}
	w.seq++
	e := queueWait[K]{key: k, at: at, seq: w.seq, add: add}
	i, ok := w.pos[k]
	if !ok {
		i = len(w.heap)
		w.heap = append(w.heap, e)
		w.pos[k] = i
	}
	w.heap[i] = e
	w.fix(i)
	w.arm(at, now)
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
	i, ok := w.pos[k]
	if !ok {
		return
	}
	last := len(w.heap) - 1
	w.swap(i, last)
	w.heap[last] = queueWait[K]{}
	w.heap = w.heap[:last]
	delete(w.pos, k)
	if i < last {
		w.fix(i)
	}
}

// reset removes every wait and stops the timer.
func (w *queueWaits[K]) reset() {
	clear(w.heap)
	w.heap = w.heap[:0]
	clear(w.pos)
	if w.timer != nil {
		w.timer.Stop()
	}
	w.armed = false
}

// fix moves heap[i] up or down to its place.
func (w *queueWaits[K]) fix(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !w.before(i, parent) {
			break
		}
		w.swap(i, parent)
		i = parent
	}
	for {
		child := 2*i + 1
		if child >= len(w.heap) {
			return
		}
		right := child + 1
		if right < len(w.heap) && w.before(right, child) {
			child = right
		}
		if !w.before(child, i) {
			return
		}
		w.swap(i, child)
		i = child
	}
}

// before reports whether heap[i] ends before heap[j].
func (w *queueWaits[K]) before(i, j int) bool {
	a := &w.heap[i]
	b := &w.heap[j]
	if a.at.Equal(b.at) {
		return a.seq < b.seq
	}
	return a.at.Before(b.at)
}

// swap swaps heap[i] and heap[j] and keeps pos up to date.
func (w *queueWaits[K]) swap(i, j int) {
	w.heap[i], w.heap[j] = w.heap[j], w.heap[i]
	w.pos[w.heap[i].key] = i
	w.pos[w.heap[j].key] = j
}
