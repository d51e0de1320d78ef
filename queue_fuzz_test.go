package kctl

import (
	"testing"
	"testing/synctest"
	"time"
)

// queueModel is a trivially correct Queue over keys 0..3: it keeps a few fields
// per key and finds the next key by scanning all of them.
type queueModel struct {
	now, age, debounce, minInterval int64
	seq                             int // orders joins and waits that happen at the same time
	shutdown                        bool
	keys                            [4]modelKey
}

type modelKey struct {
	queued, low     bool  // in a line; low: in the low line
	joinAt          int64 // when it joined its line
	seq             int
	processing      bool
	dirty, dirtyLow bool // added while processing (dirtyLow: by low adds only)
	waiting         bool // to be added at waitAt
	waitLow         bool // at low priority
	heldLow         bool // handed out from the low line: a requeue while processing is low
	waitAt          int64
	waitSeq         int
	started         bool // handed out at startedAt
	startedAt       int64
	failures        int
}

func (m *queueModel) next() int { m.seq++; return m.seq }

// aged reports whether a queued low key counts as normal: it joined the
// normal line age after it was added.
func (m *queueModel) aged(s *modelKey) bool { return s.low && m.now-s.joinAt >= m.age }

func (m *queueModel) ready(k int, low bool) {
	s := &m.keys[k]
	switch {
	case m.shutdown:
	case s.processing:
		if !s.dirty {
			s.dirty, s.dirtyLow = true, low
		} else if !low {
			s.dirtyLow = false
		}
	case s.queued:
		if !low && s.low && !m.aged(s) {
			s.low, s.joinAt, s.seq = false, m.now, m.next()
		}
	case s.started && m.now < s.startedAt+m.minInterval:
		m.waitUntil(k, s.startedAt+m.minInterval, low)
	default: // queued at normal priority, it no longer waits
		s.queued, s.low, s.joinAt, s.seq = true, low, m.now, m.next()
		s.waiting = s.waiting && low
	}
}

func (m *queueModel) waitUntil(k int, at int64, low bool) {
	s := &m.keys[k]
	if s.waiting && at >= s.waitAt {
		s.waitLow = s.waitLow && low // a normal wait never becomes low
		return
	}
	s.waitLow = low && (!s.waiting || s.waitLow)
	s.waiting, s.waitAt, s.waitSeq = true, at, m.next()
}

func (m *queueModel) add(k int, low bool) {
	if m.debounce > 0 && !low && !m.keys[k].queued && !m.shutdown {
		m.waitUntil(k, m.now+m.debounce, false)
	} else {
		m.ready(k, low)
	}
}

func (m *queueModel) addAfter(k int, d time.Duration) {
	if d <= 0 {
		m.add(k, false)
	} else if !m.shutdown {
		s := &m.keys[k]
		m.waitUntil(k, m.now+int64(d), s.processing && s.heldLow)
	}
}

func (m *queueModel) advance(d time.Duration) {
	end := m.now + int64(d)
	for {
		next := -1
		for k := range m.keys {
			s := &m.keys[k]
			if s.waiting && s.waitAt <= end && (next < 0 || s.waitAt < m.keys[next].waitAt ||
				s.waitAt == m.keys[next].waitAt && s.waitSeq < m.keys[next].waitSeq) {
				next = k
			}
		}
		if next < 0 || m.shutdown {
			break
		}
		m.now = m.keys[next].waitAt
		m.keys[next].waiting = false
		m.ready(next, m.keys[next].waitLow)
	}
	m.now = end
}

// get returns the key Get hands out: the first of the normal line (normal
// keys by join time, aged low keys from age after theirs, aged ones first on
// a tie), else the first low key; -1 if none, -2 after shutdown.
func (m *queueModel) get() int {
	if m.shutdown {
		return -2
	}
	type rank struct {
		at     int64
		normal int
		seq    int
	}
	rankOf := func(s *modelKey) rank {
		switch {
		case !s.low:
			return rank{s.joinAt, 1, s.seq}
		case m.aged(s):
			return rank{s.joinAt + m.age, 0, s.seq}
		}
		return rank{1 << 62, 0, s.seq} // after every normal key, in join order
	}
	less := func(a, b rank) bool {
		return a.at < b.at || a.at == b.at && (a.normal < b.normal || a.normal == b.normal && a.seq < b.seq)
	}
	best := -1
	for k := range m.keys {
		if s := &m.keys[k]; s.queued && (best < 0 || less(rankOf(s), rankOf(&m.keys[best]))) {
			best = k
		}
	}
	if best >= 0 {
		s := &m.keys[best]
		s.queued, s.processing, s.started, s.startedAt = false, true, true, m.now
		s.heldLow = s.low
	}
	return best
}

func (m *queueModel) done(k int) {
	s := &m.keys[k]
	if !s.processing {
		return
	}
	s.processing = false
	s.heldLow = false
	if s.dirty {
		s.dirty = false
		m.ready(k, s.dirtyLow)
	}
}

func (m *queueModel) shutDown() {
	m.shutdown = true
	for k := range m.keys {
		s := &m.keys[k]
		s.queued, s.dirty, s.waiting = false, false, false
	}
}

var fuzzDelays = [...]time.Duration{0, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 5 * time.Millisecond}

// FuzzQueue drives a Queue and the queueModel with the same random operations
// in a synctest bubble and fails at the first difference. The first byte
// picks the options (bit 0: Debounce 2ms, bit 1: MinInterval 3ms); then each
// pair of bytes is one operation on one of 4 keys.
func FuzzQueue(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 3, 0, 3, 0, 4, 0, 3, 0})
	f.Add([]byte{1, 2, 5, 0, 0, 3, 0, 5, 1, 3, 0, 4, 0})
	f.Add([]byte{2, 1, 1, 0, 2, 3, 0, 5, 3, 3, 0, 4, 2, 0, 2, 3, 0})
	f.Add([]byte{3, 6, 1, 6, 1, 5, 4, 3, 0, 7, 1, 7, 0, 3, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		synctest.Test(t, func(t *testing.T) {
			opts := QueueOptions[int]{
				RateLimiter:         NewRateLimiter[int](time.Millisecond, 8*time.Millisecond, 0, 0),
				AgeLowPriorityAfter: 4 * time.Millisecond,
			}
			if data[0]&1 != 0 {
				opts.Debounce = 2 * time.Millisecond
			}
			if data[0]&2 != 0 {
				opts.MinInterval = 3 * time.Millisecond
			}
			q := NewQueue(opts)
			defer q.ShutDown()
			m := &queueModel{age: int64(opts.AgeLowPriorityAfter), debounce: int64(opts.Debounce), minInterval: int64(opts.MinInterval)}
			for n := 1; n+1 < len(data); n += 2 {
				op, k := data[n]%8, int(data[n+1]%4)
				var step string
				switch op {
				case 0:
					step = "Add"
					q.Add(k)
					m.add(k, false)
				case 1:
					step = "AddLowPriority"
					q.AddLowPriority(k)
					m.add(k, true)
				case 2:
					d := fuzzDelays[data[n+1]/4%5]
					step = "AddAfter " + d.String()
					q.AddAfter(k, d)
					m.addAfter(k, d)
				case 3:
					got, ok, shutdown := tryGet(q)
					if !ok {
						got = -1
					}
					if shutdown {
						got = -2
					}
					if want := m.get(); got != want {
						t.Fatalf("op %d at %v: q.Get() = %d, want %d (-1 none, -2 shutdown)", n, time.Duration(m.now), got, want)
					}
					continue
				case 4:
					step = "Done"
					q.Done(k)
					m.done(k)
				case 5:
					d := fuzzDelays[data[n+1]%5] + time.Millisecond
					step = "Sleep " + d.String()
					time.Sleep(d)
					synctest.Wait()
					m.advance(d)
				case 6:
					step = "AddRateLimited"
					q.AddRateLimited(k)
					d := backoff(time.Millisecond, 8*time.Millisecond, m.keys[k].failures)
					m.keys[k].failures++
					m.addAfter(k, d)
				case 7:
					if data[n+1] >= 128 {
						step = "ShutDown"
						q.ShutDown()
						m.shutDown()
					} else {
						step = "Forget"
						q.Forget(k)
						m.keys[k].failures = 0
					}
				}
				checkQueueInvariants(t, q)
				queued, processing := 0, 0
				for j := range m.keys {
					if m.keys[j].queued {
						queued++
					}
					if m.keys[j].processing {
						processing++
					}
					if got := q.NumRequeues(j); got != m.keys[j].failures {
						t.Fatalf("op %d (%s %d): q.NumRequeues(%d) = %d, want %d", n, step, k, j, got, m.keys[j].failures)
					}
				}
				if inFlight, _, _ := q.InFlight(); q.Len() != queued || inFlight != processing {
					t.Fatalf("op %d (%s %d): q.Len() = %d, q.InFlight() = %d, want %d, %d", n, step, k, q.Len(), inFlight, queued, processing)
				}
			}
			// Whatever happened, the queue forgets every key once all work is done.
			for range 3 {
				time.Sleep(time.Second)
				synctest.Wait()
				for j := range m.keys {
					q.Done(j)
				}
				for k, ok, _ := tryGet(q); ok; k, ok, _ = tryGet(q) {
					q.Done(k)
				}
			}
			if n := queueKeysKept(q); n != 0 {
				t.Fatalf("%d keys still tracked after all work was done", n)
			}
		})
	})
}
