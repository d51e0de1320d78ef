package kctl

// A Queue's delays: a binary min-heap of the waiting keys on (due time, seq),
// served by one timer.

import (
	"math"
	"time"
)

// waitLocked puts slot i in the heap, due at at: with add == fWaitAdd, to be
// made ready (an earlier add wins); with 0, only to keep the slot (MinInterval).
func (q *Queue[K]) waitLocked(i uint32, at int64, add uint8, now int64) {
	s := &q.slots[i]
	if s.flags&fWaiting == 0 {
		s.pos = int32(len(q.wait))
		q.wait = append(q.wait, item{})
	} else if s.flags&fWaitAdd != 0 && (add == 0 || at >= q.wait[s.pos].at) {
		return
	}
	q.seq++
	q.wait[s.pos] = item{at, q.seq, i}
	s.flags |= fWaiting | add
	q.siftLocked(int(s.pos))
	q.armLocked(now)
}

// armLocked makes the timer fire when wait[0] is due.
func (q *Queue[K]) armLocked(now int64) {
	if len(q.wait) > 0 && (!q.armed || q.armedAt > q.wait[0].at) {
		if q.timer == nil {
			q.timer = time.AfterFunc(math.MaxInt64, q.fire)
		}
		q.armed = true
		q.armedAt = q.wait[0].at
		q.timer.Reset(time.Duration(q.armedAt - now))
	}
}

// fire runs on the timer. A spurious call is harmless.
func (q *Queue[K]) fire() {
	q.mu.Lock()
	q.armed = false
	q.unlockAdded(q.dueLocked(q.now(true)))
}

// dueLocked makes the keys due by now ready, in (at, seq) order, re-arms
// the timer for the next one and reports how many keys it queued.
func (q *Queue[K]) dueLocked(now int64) (added int) {
	for len(q.wait) > 0 && q.wait[0].at <= now {
		i := q.wait[0].idx
		add := q.slots[i].flags&fWaitAdd != 0
		q.unwaitLocked(i)
		if add {
			added += q.readyLocked(i, false, now)
		}
		q.idleLocked(i)
	}
	q.armLocked(now)
	return added
}

// unwaitLocked takes slot i out of wait.
func (q *Queue[K]) unwaitLocked(i uint32) {
	j := int(q.slots[i].pos)
	last := len(q.wait) - 1
	q.slots[i].flags &^= fWaiting | fWaitAdd
	q.wait[j] = q.wait[last]
	q.wait = q.wait[:last]
	if j < last {
		q.siftLocked(j)
	}
}

// siftLocked moves wait[j] up or down to its place in the heap.
func (q *Queue[K]) siftLocked(j int) {
	w := q.wait
	e := q.wait[j]
	for ; j > 0 && e.before(&w[(j-1)/2]); j = (j - 1) / 2 {
		q.putLocked(j, w[(j-1)/2])
	}
	for c := 2*j + 1; c < len(w); c = 2*j + 1 {
		if c+1 < len(w) { // take the earlier child without a branch: it is unpredictable
			d := 0
			if w[c+1].at < w[c].at {
				d = 1
			}
			if w[c+1].at == w[c].at && w[c+1].seq < w[c].seq {
				d = 1
			}
			c += d
		}
		if !w[c].before(&e) {
			break
		}
		q.putLocked(j, w[c])
		j = c
	}
	q.putLocked(j, e)
}

func (q *Queue[K]) putLocked(j int, e item) {
	q.wait[j] = e
	q.slots[e.idx].pos = int32(j)
}

func (e *item) before(f *item) bool { return e.at < f.at || e.at == f.at && e.seq < f.seq }
