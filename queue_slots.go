package kctl

// A Queue's slots, one per key in use: their flags, finding, allocating and
// freeing them, making a key ready, the hot flags that let add skip the lock,
// and the normal and low lines that keys are queued in.

import (
	"math"
	"sync/atomic"
)

// Slot flags. A queued slot is neither processing nor dirty; fLow qualifies
// fQueued (its live item is in low) or fDirty (only low adds came in).
const (
	fUsed       uint8 = 1 << iota // slot belongs to key
	fQueued                       // in normal or low; counted in n
	fLow                          // see above
	fProcessing                   // handed out by Get, not yet Done
	fDirty                        // added while processing: queued again at Done
	fWaiting                      // in wait at pos
	fWaitAdd                      // with fWaiting: made ready when due; else only kept until MinInterval passed
)

type slot[K comparable] struct {
	key       K
	flags     uint8
	pos       int32        // fWaiting: index in wait
	seq       uint64       // fQueued|fLow: seq of the live item in low
	addedAt   int64        // fQueued: when it was queued (set when timed or low)
	startedAt int64        // when Get last handed it out (set when timed; long ago for a new slot)
	hot       *atomic.Bool // nil or flags&(fQueued|fLow) == fQueued, for add to read without mu
}

// mirror updates s.hot; call it after each change of fQueued or fLow.
func (s *slot[K]) mirror() {
	if s.hot != nil {
		s.hot.Store(s.flags&(fQueued|fLow) == fQueued)
	}
}

// item is an element of wait (due at at), normal (joined at at) or low.
type item struct {
	at  int64
	seq uint64
	idx uint32
}

// findLocked is q.index[k], but first tries the slot Get handed out last: a
// worker mostly passes back the key it just got (AddAfter, AddRateLimited, Done).
func (q *Queue[K]) findLocked(k K) (uint32, bool) {
	if int(q.last) < len(q.slots) && q.slots[q.last].flags != 0 && q.slots[q.last].key == k {
		return q.last, true
	}
	i, ok := q.index[k]
	return i, ok
}

func (q *Queue[K]) allocLocked(k K) uint32 {
	if len(q.free) == 0 {
		q.free = append(q.free, uint32(len(q.slots)))
		q.slots = append(q.slots, slot[K]{})
	}
	i := q.free[len(q.free)-1]
	q.free = q.free[:len(q.free)-1]
	q.slots[i] = slot[K]{key: k, flags: fUsed, startedAt: math.MinInt64 / 2}
	q.index[k] = i
	return i
}

// idleLocked frees slot i if nothing holds it any more.
func (q *Queue[K]) idleLocked(i uint32) {
	if s := &q.slots[i]; s.flags == fUsed {
		delete(q.index, s.key)
		q.slots[i] = slot[K]{}
		q.free = append(q.free, i)
	}
}

// readyLocked is where every add ends up: a processing key is marked dirty, a queued low key is
// raised by a normal add, one within MinInterval of its last start waits, any other is queued (1)
// and, if normal, leaves wait.
func (q *Queue[K]) readyLocked(i uint32, low bool, now int64) int {
	s := &q.slots[i]
	switch {
	case s.flags&fProcessing != 0: // low at Done only if every add meanwhile was low
		keepLow := low && s.flags&(fDirty|fLow) != fDirty
		s.flags = s.flags&^fLow | fDirty
		if keepLow {
			s.flags |= fLow
		}
		return 0
	case s.flags&fQueued != 0: // a normal add raises a low key that has not aged; its low item dies
		if !low && s.flags&fLow != 0 && now-s.addedAt < q.age {
			s.flags &^= fLow
			s.mirror()
			q.normal.push(item{at: now, idx: i})
		}
		return 0
	case now < s.startedAt+q.minInterval:
		q.waitLocked(i, s.startedAt+q.minInterval, fWaitAdd, now)
		return 0
	}
	s.flags |= fQueued
	if low {
		q.seq++
		s.seq = q.seq
		s.flags |= fLow
		q.low.push(item{seq: q.seq, idx: i})
	} else {
		q.normal.push(item{at: now, idx: i})
		if s.flags&fWaiting != 0 {
			q.unwaitLocked(i) // queued now, which is earlier than due
		}
	}
	s.addedAt = now
	q.n++
	s.mirror()
	q.cond.Signal()
	return 1
}

// publishLocked gives slot i a hot flag: the one its key had in q.hot (unused
// since its slot was freed) or a new one, listed in fresh until the next rebuild
// of q.hot, which keeps the flags of idle keys for their next slot unless they
// outnumber the keys in use.
func (q *Queue[K]) publishLocked(i uint32) {
	s := &q.slots[i]
	m := *q.hot.Load()
	s.hot = m[s.key]
	if s.hot == nil {
		s.hot = new(atomic.Bool)
		q.fresh = append(q.fresh, hotEntry[K]{s.key, s.hot})
		if len(q.fresh) > len(m)/8 { // amortized O(8) per new flag
			prune := len(m) > 2*len(q.slots)+1024
			n := make(map[K]*atomic.Bool, len(m)+len(q.fresh))
			for k, h := range m {
				if _, ok := q.index[k]; !prune || ok {
					n[k] = h
				}
			}
			for _, e := range q.fresh {
				if j, ok := q.index[e.key]; ok && q.slots[j].hot == e.hot { // the live flag wins
					n[e.key] = e.hot
				} else if !prune && n[e.key] == nil {
					n[e.key] = e.hot
				}
			}
			q.hot.Store(&n)
			clear(q.fresh)
			q.fresh = q.fresh[:0]
		}
	}
	s.mirror()
}

type hotEntry[K comparable] struct {
	key K
	hot *atomic.Bool
}

func (q *Queue[K]) liveLow(e item) bool {
	s := &q.slots[e.idx]
	return s.flags&(fQueued|fLow) == fQueued|fLow && s.seq == e.seq
}

// popLocked takes the next key (q.n > 0): the head of low if normal is empty
// or the low key aged before the head of normal joined, else the head of normal.
func (q *Queue[K]) popLocked() uint32 {
	for q.low.len() > 0 && !q.liveLow(q.low.buf[q.low.head]) {
		q.low.pop()
	}
	if q.low.len() > 0 && (q.normal.len() == 0 || q.normal.buf[q.normal.head].at-q.slots[q.low.buf[q.low.head].idx].addedAt >= q.age) {
		return q.low.pop().idx
	}
	return q.normal.pop().idx
}

// fifo is a queue on a slice: a push shifts the rest down once half of the
// slice is popped, so push and pop are O(1) amortized.
type fifo struct {
	buf  []item
	head int
}

func (f *fifo) len() int { return len(f.buf) - f.head }

func (f *fifo) push(e item) {
	if f.head > 0 && f.head >= len(f.buf)/2 {
		f.buf = f.buf[:copy(f.buf, f.buf[f.head:])]
		f.head = 0
	}
	f.buf = append(f.buf, e)
}

func (f *fifo) pop() item { f.head++; return f.buf[f.head-1] }
