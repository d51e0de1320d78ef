package kctl

// The order a Queue hands its keys out in: the queue line hook
// (keyLine), and floor 1's line, first in first out (fifo), on a slice
// (queueLine). It uses no other file; queue.go uses it (see the order at
// the top of ratelimit.go).

import "time"

// keyLine is the order in which a Queue hands out its queued keys: the
// queue line hook. Floor 1's is fifo: first in, first out, whatever the
// priority. A Queue's first AddLowPriority (queue_priority.go) replaces
// it with priorityLine: low keys after normal ones, until they age. A
// Queue calls each method in one place, with its lock held.
type keyLine[K comparable] interface {
	// push puts k, just queued, at the back of the line; low if it was
	// added at low priority. k is not in the line.
	push(k K, low bool, now time.Time)
	// raise is a normal add of k, queued at low priority since then: it
	// reports whether k is now at normal priority.
	raise(k K, since, now time.Time) bool
	// pop takes out the key to hand out next. A key is queued.
	pop() K
	// reset removes every key.
	reset()
}

// fifo is floor 1's keyLine: one line in the order keys were queued.
type fifo[K comparable] struct {
	line queueLine[K]
}

func (l *fifo[K]) push(k K, _ bool, now time.Time) {
	l.line.push(queueItem[K]{key: k, at: now})
}

// raise changes nothing: every key has the same priority.
func (l *fifo[K]) raise(K, time.Time, time.Time) bool { return false }

func (l *fifo[K]) pop() K { return l.line.pop().key }

func (l *fifo[K]) reset() { l.line.reset() }

// queueItem is an item of a queueLine.
type queueItem[K comparable] struct {
	key K
	// at is when the key joined the line.
	at time.Time
	// seq tells a live item of a priorityLine's low line from a dead
	// one (low only).
	seq uint64
}

// queueLine is a FIFO of items on a slice. pop zeroes the slot it
// frees, and push moves the items to the front once half the slice is
// popped: both are O(1) amortized, and a steady line does not allocate.
type queueLine[K comparable] struct {
	items []queueItem[K]
	head  int
}

func (l *queueLine[K]) len() int {
	return len(l.items) - l.head
}

// first is the item pop returns next. Call it only when len() > 0.
func (l *queueLine[K]) first() queueItem[K] {
	return l.items[l.head]
}

func (l *queueLine[K]) push(e queueItem[K]) {
	if l.head > 0 && l.head >= len(l.items)/2 {
		n := copy(l.items, l.items[l.head:])
		clear(l.items[n:])
		l.items = l.items[:n]
		l.head = 0
	}
	l.items = append(l.items, e)
}

// pop takes the first item out. Call it only when len() > 0.
func (l *queueLine[K]) pop() queueItem[K] {
	e := l.items[l.head]
	l.items[l.head] = queueItem[K]{}
	l.head++
	return e
}

// reset removes every item.
func (l *queueLine[K]) reset() {
	clear(l.items)
	l.items = l.items[:0]
	l.head = 0
}
