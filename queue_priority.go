package kctl

// Floor 2: a Queue's priorities, on the queue line hook (queue_line.go's
// keyLine): AddLowPriority, and priorityLine, the line of low keys
// behind normal ones until they age, which it puts in the place of floor
// 1's first-in, first-out line.

import "time"

// AddLowPriority is Add for keys from an informer's initial list or a
// periodic resync: they are handed out after normal keys until they age (see Queue).
func (q *Queue[K]) AddLowPriority(k K) {
	q.mu.Lock()
	f, ok := q.line.(*fifo[K])
	if ok { // the first: its keys keep their order, at normal priority
		q.line = newPriorityLine(f, q.age)
	}
	q.mu.Unlock()
	q.add(k, 0, true)
}

// priorityLine is the keyLine of a Queue with low keys: a low key is
// handed out after the normal ones, in the order low keys were queued,
// until it has waited age; it then goes before the normal keys that
// joined after it aged. A normal add of a low key that has not aged
// moves it to the back of the normal line.
type priorityLine[K comparable] struct {
	age time.Duration
	// ready is the line of the keys queued at normal priority, each once,
	// in the order they joined it (at).
	ready queueLine[K]
	// low is the line of the keys queued at low priority, in the order
	// they were queued (at). An item is live if live maps its key to its
	// seq; pop drops the others (keys raised to ready since).
	low queueLine[K]
	// live is the seq of the live item in low of each low key.
	live map[K]uint64
	// seq is the last seq given to an item of low.
	seq uint64
}

// newPriorityLine is a priorityLine holding f's keys, in order, at
// normal priority.
func newPriorityLine[K comparable](f *fifo[K], age time.Duration) *priorityLine[K] {
	l := &priorityLine[K]{age: age, live: map[K]uint64{}}
	for f.line.len() > 0 {
		l.ready.push(f.line.pop())
	}
	return l
}

func (l *priorityLine[K]) push(k K, low bool, now time.Time) {
	if !low {
		l.ready.push(queueItem[K]{key: k, at: now})
		return
	}
	l.seq++
	l.live[k] = l.seq
	l.low.push(queueItem[K]{key: k, at: now, seq: l.seq})
}

// raise moves low key k to the back of the normal line, unless it aged
// (it then goes before the keys that joined after): its item in low is
// no longer live.
func (l *priorityLine[K]) raise(k K, since, now time.Time) bool {
	if now.Sub(since) >= l.age {
		return false
	}
	delete(l.live, k)
	l.ready.push(queueItem[K]{key: k, at: now})
	return true
}

// pop takes the first low key if the normal line is empty or the low
// key aged before the first normal key joined; else the first normal
// key.
func (l *priorityLine[K]) pop() K {
	for l.low.len() > 0 {
		first := l.low.first()
		seq, ok := l.live[first.key]
		if ok && seq == first.seq {
			break
		}
		l.low.pop()
	}
	if l.low.len() == 0 {
		return l.ready.pop().key
	}
	if l.ready.len() == 0 {
		return l.popLow()
	}
	aged := l.low.first().at.Add(l.age)
	if aged.After(l.ready.first().at) {
		return l.ready.pop().key
	}
	return l.popLow()
}

// popLow takes the first item of low, which is live.
func (l *priorityLine[K]) popLow() K {
	k := l.low.pop().key
	delete(l.live, k)
	return k
}

func (l *priorityLine[K]) reset() {
	l.ready.reset()
	l.low.reset()
	clear(l.live)
}
