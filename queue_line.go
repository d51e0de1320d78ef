package kctl

// The lines a Queue hands keys out from: a FIFO on a slice. It uses no
// other file; queue.go uses it (see the order at the top of
// ratelimit.go).

import "time"

// queueItem is an item of a queueLine.
type queueItem[K comparable] struct {
	key K
	// at is when the key joined the normal line (ready only).
	at time.Time
	// seq tells a live item of lowReady from a dead one (lowReady only).
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
