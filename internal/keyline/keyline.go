// Package keyline holds the orders in which kctl's Queue hands out its
// queued keys: FIFO, first in first out, and Priority, low keys behind
// normal ones until they age. A line holds each queued key once. None is
// goroutine-safe: the Queue calls them with its lock held.
package keyline

import "time"

// Line is the order in which a Queue hands out its queued keys.
type Line[K comparable] interface {
	// Push puts k, just queued, at the back of the line; low if it was
	// added at low priority. k is not in the line.
	Push(k K, low bool, now time.Time)
	// Raise is a normal add of k, queued since then: if k is at low
	// priority, it reports whether k is now at normal priority.
	Raise(k K, since, now time.Time) bool
	// Pop takes out the key to hand out next, and whether it was at low
	// priority. Call it only when a key is in the line.
	Pop() (k K, low bool)
	// Reset removes every key.
	Reset()
}

// FIFO is a Line in the order keys were pushed, whatever their
// priority. The zero value is an empty line.
type FIFO[K comparable] struct {
	line slice[K]
}

func (l *FIFO[K]) Push(k K, _ bool, now time.Time) {
	l.line.push(item[K]{key: k, at: now})
}

// Raise changes nothing: every key has the same priority.
func (l *FIFO[K]) Raise(K, time.Time, time.Time) bool { return false }

func (l *FIFO[K]) Pop() (K, bool) { return l.line.pop().key, false }

func (l *FIFO[K]) Reset() { l.line.reset() }

// Priority is a Line in which a low key is handed out after the normal
// ones, in the order low keys were pushed, until it has waited age; it
// then goes before the normal keys pushed after it aged. A Raise of a
// low key that has not aged moves it to the back of the normal line.
// Make it with NewPriority.
type Priority[K comparable] struct {
	age time.Duration
	// ready is the line of the keys at normal priority, each once, in
	// the order they joined it (at).
	ready slice[K]
	// low is the line of the keys at low priority, in the order they
	// were pushed (at). An item is live if live maps its key to its seq;
	// Pop drops the others (keys raised to ready since).
	low slice[K]
	// live is the seq of the live item in low of each low key.
	live map[K]uint64
	// seq is the last seq given to an item of low.
	seq uint64
}

// NewPriority is a Priority line whose low keys age after age, holding
// f's keys, in order, at normal priority; f is then empty.
func NewPriority[K comparable](f *FIFO[K], age time.Duration) *Priority[K] {
	l := &Priority[K]{age: age, live: map[K]uint64{}}
	for f.line.len() > 0 {
		l.ready.push(f.line.pop())
	}
	return l
}

func (l *Priority[K]) Push(k K, low bool, now time.Time) {
	if !low {
		l.ready.push(item[K]{key: k, at: now})
		return
	}
	l.seq++
	l.live[k] = l.seq
	l.low.push(item[K]{key: k, at: now, seq: l.seq})
}

// Raise moves low key k to the back of the normal line, unless it aged
// (it then goes before the keys that joined after): its item in low is
// no longer live. A key at normal priority stays where it is.
func (l *Priority[K]) Raise(k K, since, now time.Time) bool {
	if _, ok := l.live[k]; !ok {
		return false
	}
	if now.Sub(since) >= l.age {
		return false
	}
	delete(l.live, k)
	l.ready.push(item[K]{key: k, at: now})
	return true
}

// Pop takes the first low key if the normal line is empty or the low
// key aged before the first normal key joined; else the first normal
// key.
func (l *Priority[K]) Pop() (K, bool) {
	for l.low.len() > 0 {
		first := l.low.first()
		seq, ok := l.live[first.key]
		if ok && seq == first.seq {
			break
		}
		l.low.pop()
	}
	if l.low.len() == 0 {
		return l.ready.pop().key, false
	}
	if l.ready.len() == 0 {
		return l.popLow(), true
	}
	aged := l.low.first().at.Add(l.age)
	if aged.After(l.ready.first().at) {
		return l.ready.pop().key, false
	}
	return l.popLow(), true
}

// popLow takes the first item of low, which is live.
func (l *Priority[K]) popLow() K {
	k := l.low.pop().key
	delete(l.live, k)
	return k
}

func (l *Priority[K]) Reset() {
	l.ready.reset()
	l.low.reset()
	clear(l.live)
}

// Keys returns the keys in line, at normal priority and live at low
// priority, in their order: for a test of its user's invariants.
func Keys[K comparable](line Line[K]) (normal, low []K) {
	switch l := line.(type) {
	case *FIFO[K]:
		return l.line.keys(nil), nil
	case *Priority[K]:
		live := func(e item[K]) bool {
			seq, ok := l.live[e.key]
			return ok && seq == e.seq
		}
		return l.ready.keys(nil), l.low.keys(live)
	}
	return nil, nil
}

// item is an item of a slice.
type item[K comparable] struct {
	key K
	// at is when the key joined the line.
	at time.Time
	// seq tells a live item of a Priority's low line from a dead one
	// (low only).
	seq uint64
}

// slice is a FIFO of items on a slice. pop zeroes the slot it frees,
// and push moves the items to the front once half the slice is popped:
// both are O(1) amortized, and a steady line does not allocate.
type slice[K comparable] struct {
	items []item[K]
	head  int
}

func (l *slice[K]) len() int {
	return len(l.items) - l.head
}

// first is the item pop returns next. Call it only when len() > 0.
func (l *slice[K]) first() item[K] {
	return l.items[l.head]
}

func (l *slice[K]) push(e item[K]) {
	if l.head > 0 && l.head >= len(l.items)/2 {
		n := copy(l.items, l.items[l.head:])
		clear(l.items[n:])
		l.items = l.items[:n]
		l.head = 0
	}
	l.items = append(l.items, e)
}

// pop takes the first item out. Call it only when len() > 0.
func (l *slice[K]) pop() item[K] {
	e := l.items[l.head]
	l.items[l.head] = item[K]{}
	l.head++
	return e
}

// reset removes every item.
func (l *slice[K]) reset() {
	clear(l.items)
	l.items = l.items[:0]
	l.head = 0
}

// keys is the keys of the items that keep takes (nil: every item), in
// order.
func (l *slice[K]) keys(keep func(item[K]) bool) []K {
	var ks []K
	for _, e := range l.items[l.head:] {
		if keep == nil || keep(e) {
			ks = append(ks, e.key)
		}
	}
	return ks
}
