package kctl

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kctl-dev/kctl/internal/backoff"
	"k8s.io/client-go/util/workqueue"
)

// runQueueScript plays a script against a new queue in a synctest bubble, so
// time only moves on "sleep". Steps are separated by ";":
//
//	add k | low k | after k 5ms | limited k | forget k | done k | shutdown
//	get k     Get hands out k          get -     nothing is ready
//	get !     Get reports shutdown     sleep 5ms time passes, timers fire
//	len n     Len() == n               requeues k n   NumRequeues(k) == n
func runQueueScript(t *testing.T, opts QueueOptions[string], script string) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		t.Helper()
		q := NewQueue(opts)
		defer q.ShutDown()
		for n, step := range strings.Split(script, ";") {
			f := append(strings.Fields(step), "", "")
			switch f[0] {
			case "add":
				q.Add(f[1])
			case "low":
				q.AddLowPriority(f[1])
			case "after":
				q.AddAfter(f[1], parseDuration(t, f[2]))
			case "limited":
				q.AddRateLimited(f[1])
			case "forget":
				q.Forget(f[1])
			case "done":
				q.Done(f[1])
			case "shutdown":
				q.ShutDown()
			case "sleep":
				time.Sleep(parseDuration(t, f[1]))
				synctest.Wait()
			case "get":
				k, ok, shutdown := tryGet(q)
				got := map[bool]string{true: k, false: "-"}[ok]
				if shutdown {
					got = "!"
				}
				if got != f[1] {
					t.Fatalf("step %d (%s): q.Get() = %q, want %q", n, step, got, f[1])
				}
			case "len":
				if got := strconv.Itoa(q.Len()); got != f[1] {
					t.Fatalf("step %d (%s): q.Len() = %s, want %s", n, step, got, f[1])
				}
			case "requeues":
				if got := strconv.Itoa(q.NumRequeues(f[1])); got != f[2] {
					t.Fatalf("step %d (%s): q.NumRequeues(%q) = %s, want %s", n, step, f[1], got, f[2])
				}
			case "":
			default:
				t.Fatalf("step %d: unknown step %q", n, step)
			}
			checkQueueInvariants(t, q)
		}
	})
}

// tryGet is Get that returns ok=false instead of blocking. It must not race
// with other goroutines using q: in a bubble, call it after synctest.Wait.
func tryGet[K comparable](q *Queue[K]) (k K, ok, shutdown bool) {
	if q.Len() == 0 && !q.ShuttingDown() {
		return k, false, false
	}
	k, shutdown = q.Get()
	return k, !shutdown, shutdown
}

func parseDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// checkQueueInvariants checks the invariants documented on Queue's fields
// and on its keys' (internal/keyqueue).
func checkQueueInvariants[K comparable](t *testing.T, q *Queue[K]) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.keys.Check(); err != nil {
		t.Fatal(err)
	}
}

// queueKeysKept is the number of keys q keeps anything of: once all work
// is done and all delays passed, 0.
func queueKeysKept[K comparable](q *Queue[K]) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.keys.Kept()
}

type queueScript struct {
	name   string
	opts   QueueOptions[string]
	script string
}

func runQueueScripts(t *testing.T, tests []queueScript) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runQueueScript(t, tt.opts, tt.script) })
	}
}

func TestQueue_FairStingyExclusive(t *testing.T) {
	runQueueScripts(t, []queueScript{
		{name: "keys come out in the order they were added", script: "add a; add b; add c; get a; get b; get c; get -"},
		{name: "a key added many times comes out once", script: "add a; add b; add a; add a; len 2; get a; get b; get -"},
		{name: "a duplicate add keeps the first place", script: "add a; add b; add a; get a; get b"},
		{name: "a key being processed is not handed out again", script: "add a; get a; add a; len 0; get -; done a; len 1; get a"},
		{name: "a re-add while processing runs again after Done, once", script: "add a; get a; add a; add a; add b; done a; get b; get a; get -"},
		{name: "done without a re-add leaves nothing", script: "add a; get a; done a; get -; len 0"},
		{name: "done of a key not handed out does nothing", script: "add a; done a; done x; get a; done a; done a; get -"},
		{name: "other keys are handed out while one is processed", script: "add a; add b; get a; get b; done b; done a; get -"},
		{name: "a key added while queued, then handed out, is added again", script: "add a; add a; add a; get a; add a; add a; len 0; done a; get a; done a; add a; len 1"},
	})
}

func TestQueue_Shutdown(t *testing.T) {
	runQueueScripts(t, []queueScript{
		{name: "get reports shutdown and drops queued keys", script: "add a; shutdown; len 0; get !; add b; get !"},
		{name: "delayed keys are dropped", script: "after a 1s; shutdown; sleep 2s; get !"},
		{name: "a key in flight can still be done", script: "add a; get a; add a; shutdown; done a; get !; len 0"},
		{name: "a key added while queued is dropped too", script: "add a; add a; shutdown; add a; len 0; get !"},
		{name: "shutting down twice is fine", script: "shutdown; shutdown; get !"},
	})
}

func TestQueue_Get_BlocksUntilAKeyIsReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue(QueueOptions[string]{})
		got := make(chan string)
		go func() {
			k, _ := q.Get()
			got <- k
		}()
		synctest.Wait()
		select {
		case k := <-got:
			t.Fatalf("Get on an empty queue returned %q", k)
		default:
		}
		q.AddAfter("a", time.Second)
		if k := <-got; k != "a" {
			t.Fatalf("Get() = %q, want a", k)
		}
		q.ShutDown()
	})
}

func TestQueue_ShutDown_WakesEveryGet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue(QueueOptions[string]{})
		var wg sync.WaitGroup
		var woke atomic.Int32
		for range 5 {
			wg.Go(func() {
				if _, shutdown := q.Get(); shutdown {
					woke.Add(1)
				}
			})
		}
		synctest.Wait()
		q.ShutDown()
		wg.Wait()
		if woke.Load() != 5 {
			t.Fatalf("%d of 5 Gets reported shutdown", woke.Load())
		}
	})
}

func TestQueue_ShutDownWithDrain_WaitsForKeysInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue(QueueOptions[string]{})
		q.Add("a")
		q.Add("b")
		k, _ := q.Get()
		go func() {
			time.Sleep(time.Second)
			q.Done(k)
		}()
		start := time.Now()
		if err := q.ShutDownWithDrain(context.Background()); err != nil {
			t.Fatalf("ShutDownWithDrain() = %v", err)
		}
		if d := time.Since(start); d != time.Second {
			t.Fatalf("ShutDownWithDrain returned after %v, want 1s (when a was done)", d)
		}
		if err := q.ShutDownWithDrain(context.Background()); err != nil {
			t.Fatalf("second ShutDownWithDrain() = %v", err)
		}
	})
}

func TestQueue_ShutDownWithDrain_StopsWaitingWhenTheContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue(QueueOptions[string]{})
		q.Add("a")
		q.Get()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := q.ShutDownWithDrain(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 keys still in flight") {
			t.Fatalf("ShutDownWithDrain() = %v, want a deadline error naming 1 key in flight", err)
		}
	})
}

// A ShutDown while ShutDownWithDrain waits is the way to force the
// shutdown, as in client-go's workqueue: the wait ends at once, with an
// error naming the keys still in flight.
func TestQueue_ShutDown_EndsTheWaitOfShutDownWithDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue(QueueOptions[string]{})
		q.Add("a")
		k, _ := q.Get()
		defer q.Done(k)
		errc := make(chan error, 1)
		go func() {
			errc <- q.ShutDownWithDrain(context.Background())
		}()
		synctest.Wait()
		q.ShutDown()
		synctest.Wait()
		select {
		case err := <-errc:
			if err == nil || !strings.Contains(err.Error(), "1 keys still in flight") {
				t.Fatalf("ShutDownWithDrain() = %v, want an error naming 1 key in flight", err)
			}
		default:
			t.Fatal("ShutDownWithDrain still waits after ShutDown")
		}
	})
}

// A ShutDown before ShutDownWithDrain does not keep it from waiting.
func TestQueue_ShutDownWithDrain_AfterShutDown_StillWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue(QueueOptions[string]{})
		q.Add("a")
		k, _ := q.Get()
		q.ShutDown()
		go func() {
			time.Sleep(time.Second)
			q.Done(k)
		}()
		start := time.Now()
		if err := q.ShutDownWithDrain(context.Background()); err != nil {
			t.Fatalf("ShutDownWithDrain() = %v", err)
		}
		if d := time.Since(start); d != time.Second {
			t.Fatalf("ShutDownWithDrain returned after %v, want 1s (when a was done)", d)
		}
	})
}

// countingObserver counts metrics events; it is goroutine-safe.
type countingObserver struct {
	mu                     sync.Mutex
	added, retried         int
	waited, worked, maxDur time.Duration
}

func (o *countingObserver) Added()   { o.mu.Lock(); o.added++; o.mu.Unlock() }
func (o *countingObserver) Retried() { o.mu.Lock(); o.retried++; o.mu.Unlock() }
func (o *countingObserver) Waited(d time.Duration) {
	o.mu.Lock()
	o.waited += d
	o.mu.Unlock()
}
func (o *countingObserver) Worked(d time.Duration) {
	o.mu.Lock()
	o.worked += d
	o.mu.Unlock()
}

func TestQueue_Observer_SeesAddsWaitsWorkAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &countingObserver{}
		q := NewQueue(QueueOptions[string]{Observer: o})
		defer q.ShutDown()
		q.Add("a")
		q.Add("a") // a duplicate is not an add
		q.Add("b")
		time.Sleep(time.Second)
		q.Get() // a waited 1s
		q.Get() // b waited 1s
		time.Sleep(time.Second)
		q.Add("a") // dirty: counted when queued again at Done
		if n, unfinished, longest := q.InFlight(); n != 2 || unfinished != 2*time.Second || longest != time.Second {
			t.Fatalf("q.InFlight() = %d, %v, %v, want 2, 2s, 1s", n, unfinished, longest)
		}
		q.Done("a") // worked 1s, a queued again
		time.Sleep(time.Second)
		q.Done("b") // worked 2s
		q.AddRateLimited("c")
		time.Sleep(time.Second)
		synctest.Wait()
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.added != 4 || o.waited != 2*time.Second || o.worked != 3*time.Second || o.retried != 1 {
			t.Fatalf("countingObserver saw added=%d waited=%v worked=%v retried=%d, want 4, 2s, 3s, 1", o.added, o.waited, o.worked, o.retried)
		}
		if n, _, _ := q.InFlight(); n != 0 || q.Len() != 2 {
			t.Fatalf("q.InFlight() = %d, q.Len() = %d, want 0, 2", n, q.Len())
		}
	})
}

// Without an Observer, InFlight measures too (the queue always reads the
// clock; it used to report 0 durations then).
func TestQueue_InFlight_WithoutObserver_MeasuresDurations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue(QueueOptions[string]{})
		defer q.ShutDown()
		q.Add("a")
		q.Get()
		time.Sleep(time.Second)
		if n, unfinished, longest := q.InFlight(); n != 1 || unfinished != time.Second || longest != time.Second {
			t.Fatalf("q.InFlight() = %d, %v, %v, want 1, 1s, 1s", n, unfinished, longest)
		}
	})
}

// TestQueue_Stress runs 8 producers and 4 consumers (run it with -race). It
// checks that no key is held by two consumers and that every add is followed
// by a Get of its key: a consumer records the add count it saw at Get.
func TestQueue_Stress_NoKeyHeldTwiceAndNoAddLost(t *testing.T) {
	const keys, adds = 64, 200000
	q := NewQueue(QueueOptions[int]{
		RateLimiter:         NewRateLimiter[int](time.Microsecond, 100*time.Microsecond, 0, 0),
		AgeLowPriorityAfter: time.Millisecond,
	})
	var added, seen, held [keys]atomic.Int64
	var consumers, producers sync.WaitGroup
	for range 4 {
		consumers.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				if !held[k].CompareAndSwap(0, 1) {
					t.Errorf("key %d handed to two consumers", k)
				}
				seen[k].Store(added[k].Load())
				runtime.Gosched()
				if k%2 == 0 {
					q.Forget(k)
				}
				held[k].Store(0)
				q.Done(k)
			}
		})
	}
	for p := range 8 {
		producers.Go(func() {
			r := rand.New(rand.NewPCG(uint64(p), 0))
			for range adds / 8 {
				k := r.IntN(keys)
				added[k].Add(1)
				switch r.IntN(8) {
				case 0:
					q.AddAfter(k, time.Duration(r.IntN(100))*time.Microsecond)
				case 1:
					q.AddLowPriority(k)
				case 2:
					q.AddRateLimited(k)
				default:
					q.Add(k)
				}
			}
		})
	}
	producers.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for k := range keys {
		for seen[k].Load() != added[k].Load() {
			if time.Now().After(deadline) {
				t.Fatalf("key %d: last Get saw %d adds of %d", k, seen[k].Load(), added[k].Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
	q.ShutDown()
	consumers.Wait()
	checkQueueInvariants(t, q)
	if n := queueKeysKept(q); n != 0 {
		t.Fatalf("%d keys still tracked after shutdown", n)
	}
}

func ExampleQueue() {
	q := NewQueue(QueueOptions[string]{})
	q.Add("default/web")
	q.Add("default/db")
	q.Add("default/web") // already queued: handed out once
	for q.Len() > 0 {
		k, _ := q.Get()
		fmt.Println(k)
		q.Done(k)
	}
	q.ShutDown()
	// Output:
	// default/web
	// default/db
}

func TestQueue_LowPriority(t *testing.T) {
	age := QueueOptions[string]{AgeLowPriorityAfter: 10 * time.Millisecond}
	runQueueScripts(t, []queueScript{
		{name: "normal keys go before low ones", script: "low a; low b; add c; get c; get a; get b"},
		{name: "keys queued before the first low add keep their order", script: "add a; add b; low c; add d; get a; get b; get d; get c"},
		{name: "low keys come out in their own order", script: "low b; low a; low c; get b; get a; get c"},
		{name: "an add raises a queued low key", script: "low a; low b; add c; add b; get c; get b; get a"},
		{name: "a low add does not lower a queued key", script: "add a; add b; low a; get a; get b"},
		{name: "a raised key is handed out once", script: "low a; add a; len 1; get a; done a; get -"},
		{name: "an add raises a low key added again while queued", script: "low a; low a; add a; add a; low b; add c; get a; get c; get b"},
		{name: "a low key ages into the back of the normal line", opts: age, script: "low a; add b; sleep 10ms; add c; get b; get a; get c"},
		{name: "a low key that aged comes before later normal keys", opts: age, script: "low a; sleep 20ms; add b; add c; get a; get b"},
		{name: "an aged key keeps its place when added again", opts: age, script: "add b; low a; sleep 10ms; add a; add c; get b; get a; get c"},
		{name: "a low re-add while processing stays low", script: "add a; get a; low a; add b; done a; add c; get b; get c; get a"},
		{name: "a normal re-add while processing wins over a low one", script: "add a; get a; low a; add a; add b; done a; add c; get b; get a; get c"},
		{name: "the default age is one minute", script: "low a; add b; sleep 59s; add c; get b; get c; get a; low d; sleep 1m; add e; get d"},
	})
}

// Issue 25, item 5: a key keeps its priority when it is requeued
// (controller-runtime #3157).
func TestQueue_Requeue_KeepsItsPriority(t *testing.T) {
	runQueueScripts(t, []queueScript{
		{name: "a low key requeued after a delay comes back low", script: "low a; get a; after a 5ms; add b; done a; sleep 5ms; add c; get b; get c; get a"},
		{name: "a low key retried comes back low", script: "low a; get a; limited a; done a; sleep 10ms; add c; get c; get a"},
		{name: "a normal key requeued comes back normal", script: "add a; get a; after a 5ms; low b; done a; sleep 5ms; get a; get b"},
		{name: "a low requeue is raised by a normal add meanwhile", script: "low a; get a; after a 5ms; done a; add a; low b; get a; get b"},
		{name: "AddAfter of a low key that is not processing is normal", script: "low a; get a; done a; after a 5ms; low b; sleep 5ms; get a; get b"},
	})
}

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
					d := backoff.Delay(time.Millisecond, 8*time.Millisecond, m.keys[k].failures)
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

// benchQueue is what the benchmarks use of both queues.
type benchQueue interface {
	Add(k string)
	AddAfter(k string, d time.Duration)
	Get() (k string, shutdown bool)
	Done(k string)
	Len() int
	ShutDown()
}

// queueBenchKeys are 1000 keys shaped like namespace/name.
var queueBenchKeys = func() []string {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("namespace-%d/object-%d", i%10, i)
	}
	return keys
}()

// BenchmarkQueue compares kctl's Queue with client-go's rate-limiting
// workqueue (with DefaultTypedControllerRateLimiter), case by case, each over
// the same 1000 keys; kctl and client-go run one after the other per case:
//
//	AddGetDone    one goroutine: Add, Get, Done (ns per round)
//	Contended4x2  4 producers Add random keys, 2 consumers Get and Done (ns per Add)
//	AddAfter      a worker requeues each key it gets: Get, AddAfter(key, 1-64µs),
//	              Done; the timer makes the keys ready again (ns per round)
//
// Besides ns/op it reports cpu-ns/op, the CPU time of the whole process (all
// goroutines, the runtime included) per op: on a shared machine wall time
// also counts the time other processes hold the CPUs.
func BenchmarkQueue(b *testing.B) {
	impls := []struct {
		name string
		make func() benchQueue
	}{
		{"kctl", func() benchQueue { return NewQueue(QueueOptions[string]{}) }},
		{"clientgo", func() benchQueue {
			return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
		}},
	}
	cases := []struct {
		name string
		run  func(b *testing.B, q benchQueue)
	}{
		{"AddGetDone", benchAddGetDone},
		{"Contended4x2", benchContended},
		{"AddAfter", benchAddAfter},
	}
	for _, c := range cases {
		for _, impl := range impls {
			b.Run(impl.name+"/"+c.name, func(b *testing.B) {
				q := impl.make()
				defer q.ShutDown()
				b.ReportAllocs()
				c.run(b, q)
			})
		}
	}
}

// processCPUTime is the CPU time the process has used so far, all threads.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportProcessCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(processCPUTime()-start)/float64(b.N), "cpu-ns/op")
}

func benchAddGetDone(b *testing.B, q benchQueue) {
	for i := range 2000 { // grow maps and buffers first
		q.Add(queueBenchKeys[i%1000])
		k, _ := q.Get()
		q.Done(k)
	}
	start := processCPUTime()
	for i := 0; b.Loop(); i++ {
		q.Add(queueBenchKeys[i%1000])
		k, _ := q.Get()
		q.Done(k)
	}
	reportProcessCPU(b, start)
}

func benchContended(b *testing.B, q benchQueue) {
	var gets atomic.Int64
	var consumers, producers sync.WaitGroup
	for range 2 {
		consumers.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				gets.Add(1)
				q.Done(k)
			}
		})
	}
	b.ResetTimer()
	start := processCPUTime()
	for p := range 4 {
		producers.Go(func() {
			x := uint32(p*7919 + 1) // xorshift: a random key of 1000
			for i := p; i < b.N; i += 4 {
				x ^= x << 13
				x ^= x >> 17
				x ^= x << 5
				q.Add(queueBenchKeys[x%1000])
			}
		})
	}
	producers.Wait()
	for q.Len() > 0 { // the consumers catch up
		runtime.Gosched()
	}
	b.StopTimer()
	reportProcessCPU(b, start)
	q.ShutDown()
	consumers.Wait()
	b.ReportMetric(float64(gets.Load())/float64(b.N), "gets/op")
}

func benchAddAfter(b *testing.B, q benchQueue) {
	for _, k := range queueBenchKeys {
		q.Add(k)
	}
	start := processCPUTime()
	for i := 0; b.Loop(); i++ {
		k, _ := q.Get()
		q.AddAfter(k, time.Duration(1+i%64)*time.Microsecond)
		q.Done(k)
	}
	reportProcessCPU(b, start)
}

// The default retry limits are controller-runtime's
// (workqueue.DefaultTypedControllerRateLimiter): per key 5 ms doubling up to
// 1000 s, and a bucket of 100 tokens refilled at 10 per second over all keys.
func TestQueue_DefaultRateLimiter_IsControllerRuntimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rl := NewQueue(QueueOptions[Key]{}).rl // what every controller gets without WithRateLimiter
		calls := 0                             // the clock stands still: each call takes a token for good
		want := func(failures int) time.Duration {
			perKey := min(5*time.Millisecond<<min(failures-1, 40), 1000*time.Second)
			bucket := time.Duration(max(calls-100, 0)) * 100 * time.Millisecond
			return max(perKey, bucket)
		}
		for n := 1; n <= 40; n++ {
			calls++
			if got := rl.When(Key{Name: "a"}); got != want(n) {
				t.Fatalf("failure %d of one key: When = %v, want %v", n, got, want(n))
			}
		}
		for i := range 80 {
			calls++
			k := Key{Name: fmt.Sprint("b", i)}
			if got := rl.When(k); got != want(1) {
				t.Fatalf("call %d overall, the first failure of %s: When = %v, want %v", calls, k, got, want(1))
			}
		}
		if got := rl.NumRequeues(Key{Name: "a"}); got != 40 {
			t.Errorf("NumRequeues = %d, want 40", got)
		}
	})
}

func TestQueue_Delays(t *testing.T) {
	runQueueScripts(t, []queueScript{
		{name: "a delayed key comes out when due", script: "after a 10ms; get -; sleep 9ms; get -; sleep 1ms; get a"},
		{name: "a zero or negative delay is Add", script: "after a 0s; after b -1s; get a; get b"},
		{name: "an earlier add moves a waiting key earlier", script: "after a 10ms; after a 5ms; sleep 5ms; get a; done a; sleep 10ms; get -"},
		{name: "a later add never postpones a waiting key", script: "after a 5ms; after a 10ms; sleep 5ms; get a; done a; sleep 10ms; get -"},
		{name: "due keys come out in due order", script: "after c 3ms; after a 1ms; after b 2ms; sleep 3ms; get a; get b; get c"},
		{name: "equal due times come out in scheduling order", script: "after b 1ms; after a 1ms; sleep 1ms; get b; get a"},
		{name: "a waiting key added now runs now, not again when due", script: "after a 5ms; add a; get a; done a; sleep 5ms; get -"},
		{name: "a waiting key added at low priority runs now and when due", script: "after a 5ms; low a; get a; done a; sleep 5ms; get a"},
		{name: "a waiting key queued at Done after an add runs once", script: "add a; get a; after a 5ms; add a; done a; get a; done a; sleep 5ms; get -"},
		{name: "a key queued when delayed runs again when due", script: "add a; after a 5ms; get a; done a; sleep 5ms; get a"},
		{name: "a key due while processing runs again after Done", script: "add a; after a 1ms; get a; sleep 1ms; get -; done a; get a"},
		{name: "a queued key due again is handed out once", script: "add a; after a 1ms; sleep 1ms; len 1; get a; done a; get -"},
		{name: "a huge delay does not overflow", script: "sleep 1h; after a 2562047h47m16s; sleep 1h; get -"},
	})
}

func TestQueue_RateLimited(t *testing.T) {
	runQueueScripts(t, []queueScript{
		{name: "backoff doubles from 5ms", script: "limited a; requeues a 1; sleep 5ms; get a; done a; limited a; sleep 9ms; get -; sleep 1ms; get a; done a; limited a; sleep 19ms; get -; sleep 1ms; get a; requeues a 3"},
		{name: "forget resets the backoff", script: "limited a; limited a; requeues a 2; forget a; requeues a 0; limited a; sleep 5ms; get a"},
		{name: "plain adds do not raise the backoff", script: "add a; get a; done a; add a; requeues a 0; limited a; requeues a 1"},
		{name: "backoff is per key", script: "limited a; sleep 5ms; get a; done a; limited a; limited b; requeues a 2; requeues b 1; sleep 5ms; get b; get -; sleep 5ms; get a"},
		{name: "a custom limiter decides the delay", opts: QueueOptions[string]{RateLimiter: NewRateLimiter[string](time.Second, time.Minute, 0, 0)}, script: "limited a; sleep 999ms; get -; sleep 1ms; get a"},
	})
	// The bucket allows a burst of 100, then one per 100ms: the 101st
	// retry waits for the bucket although its backoff is only 5ms.
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue(QueueOptions[int]{})
		defer q.ShutDown()
		for i := range 101 {
			q.AddRateLimited(i)
		}
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		if n := q.Len(); n != 100 {
			t.Fatalf("after 5ms: q.Len() = %d, want 100 (the burst)", n)
		}
		time.Sleep(95 * time.Millisecond)
		synctest.Wait()
		if n := q.Len(); n != 101 {
			t.Fatalf("after 100ms: q.Len() = %d, want 101", n)
		}
	})
}

func TestQueue_Pacing(t *testing.T) {
	debounce := QueueOptions[string]{Debounce: 10 * time.Millisecond}
	every := QueueOptions[string]{MinInterval: 10 * time.Millisecond}
	runQueueScripts(t, []queueScript{
		{name: "debounce collects a burst into one run", opts: debounce, script: "add a; sleep 5ms; add a; add a; sleep 4ms; get -; sleep 1ms; get a; done a; get -"},
		{name: "debounce never postpones past the first add", opts: debounce, script: "add a; sleep 9ms; add a; sleep 1ms; get a"},
		{name: "debounce absorbs an add of a queued key", opts: debounce, script: "add a; sleep 10ms; add b; add a; get a; get -; sleep 10ms; get b"},
		{name: "debounce delays an add while processing", opts: debounce, script: "add a; sleep 10ms; get a; add a; sleep 10ms; done a; get a"},
		{name: "debounce moves a later delay earlier", opts: debounce, script: "after a 1h; add a; sleep 10ms; get a"},
		{name: "debounce leaves low adds alone", opts: debounce, script: "low a; get a"},
		{name: "min interval delays a run that comes too soon", opts: every, script: "add a; get a; done a; add a; get -; sleep 9ms; get -; sleep 1ms; get a"},
		{name: "min interval counts from the start of a run", opts: every, script: "add a; get a; sleep 10ms; done a; add a; get a"},
		{name: "min interval delays a re-add while processing", opts: every, script: "add a; get a; add a; sleep 2ms; done a; get -; sleep 8ms; get a"},
		{name: "min interval does not delay other keys", opts: every, script: "add a; get a; done a; add a; add b; get b"},
		{name: "min interval is forgotten once it passed", opts: every, script: "add a; get a; done a; sleep 10ms; len 0; add a; get a"},
		{name: "a later delay replaces the hold of a min interval", opts: every, script: "add a; get a; done a; after a 1h; sleep 10ms; get -; sleep 1h; get a"},
	})
}

func TestQueue_NewQueueAndAddAfter_StartNoGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := runtime.NumGoroutine()
		q := NewQueue(QueueOptions[int]{})
		for i := range 1000 {
			q.AddAfter(i, time.Duration(i+1)*time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			t.Fatalf("%d goroutines after NewQueue and 1000 AddAfter, want at most %d", n, before)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := q.Len(); n != 1000 {
			t.Fatalf("q.Len() = %d after all delays passed, want 1000", n)
		}
		q.ShutDown()
	})
}

func TestQueue_ManyMovesEarlier_KeepOneHeapEntryPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue(QueueOptions[int]{})
		defer q.ShutDown()
		for i := range 10000 {
			q.AddAfter(i%10, time.Hour-time.Duration(i)*time.Millisecond)
		}
		checkQueueInvariants(t, q)
		if n := queueKeysKept(q); n != 10 {
			t.Fatalf("%d heap entries for 10 waiting keys", n)
		}
	})
}

func TestQueue_WaitingUntil_ReportsAWaitToAddOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue(QueueOptions[string]{MinInterval: time.Minute})
		defer q.ShutDown()
		q.AddAfter("a", time.Hour)
		at, ok := q.WaitingUntil("a")
		if !ok || !at.Equal(time.Now().Add(time.Hour)) {
			t.Fatalf("WaitingUntil(a) = %v, %v; want in an hour", at, ok)
		}
		q.Add("b")
		k, _ := q.Get()
		q.Done(k) // a hold until the minute passed: not a wait to add
		if _, ok := q.WaitingUntil("b"); ok || q.ShuttingDown() {
			t.Fatalf("WaitingUntil(b) ok=%v, ShuttingDown %v; want false, false", ok, q.ShuttingDown())
		}
		q.ShutDown()
		if _, ok := q.WaitingUntil("a"); ok || !q.ShuttingDown() {
			t.Fatalf("after ShutDown: WaitingUntil(a) ok=%v, ShuttingDown %v", ok, q.ShuttingDown())
		}
	})
}
