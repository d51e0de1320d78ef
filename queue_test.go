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
	"testing"
	"testing/synctest"
	"time"
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

// checkQueueInvariants checks the field invariants documented on Queue.
func checkQueueInvariants[K comparable](t *testing.T, q *Queue[K]) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	queued, processing, waiting, used := 0, 0, 0, 0
	for i := range q.slots {
		s := &q.slots[i]
		if s.flags == 0 {
			continue
		}
		used++
		if j, ok := q.index[s.key]; !ok || j != uint32(i) {
			t.Fatalf("slot %d (%v) is not indexed", i, s.key)
		}
		if s.flags == fUsed {
			t.Fatalf("slot %d (%v) is idle but not freed", i, s.key)
		}
		if s.flags&fQueued != 0 {
			queued++
			if s.flags&(fProcessing|fDirty) != 0 {
				t.Fatalf("slot %d (%v) is queued and processing", i, s.key)
			}
		}
		if s.flags&fProcessing != 0 {
			processing++
		}
		if s.flags&fDirty != 0 && s.flags&fProcessing == 0 {
			t.Fatalf("slot %d (%v) is dirty but not processing", i, s.key)
		}
		if s.flags&fWaiting != 0 {
			waiting++
		}
		if s.hot != nil && s.hot.Load() != (s.flags&(fQueued|fLow) == fQueued) {
			t.Fatalf("slot %d (%v) has flags %b but its hot flag is %v", i, s.key, s.flags, s.hot.Load())
		}
	}
	for k, h := range *q.hot.Load() {
		if i, ok := q.index[k]; (!ok || q.slots[i].hot != h) && h.Load() {
			t.Fatalf("the hot flag of %v is set, but no slot holds it", k)
		}
	}
	for j := range q.wait {
		if j > 0 && q.wait[j].before(&q.wait[(j-1)/2]) {
			t.Fatalf("wait heap order broken at %d", j)
		}
		if s := &q.slots[q.wait[j].idx]; s.flags&fWaiting == 0 || s.pos != int32(j) {
			t.Fatalf("wait[%d] is slot %d (%v) with flags %b at pos %d", j, q.wait[j].idx, s.key, s.flags, s.pos)
		}
	}
	lowLive := 0
	for _, e := range q.low.buf[q.low.head:] {
		if q.liveLow(e) {
			lowLive++
		}
	}
	switch {
	case used != len(q.index) || used+len(q.free) != len(q.slots):
		t.Fatalf("%d used slots, %d indexed, %d free of %d", used, len(q.index), len(q.free), len(q.slots))
	case queued != q.n || q.n != q.normal.len()+lowLive:
		t.Fatalf("n = %d, but %d slots queued, %d normal + %d live low entries", q.n, queued, q.normal.len(), lowLive)
	case processing != q.processing:
		t.Fatalf("processing = %d, but %d slots processing", q.processing, processing)
	case waiting != len(q.wait):
		t.Fatalf("%d waiting slots, %d heap entries", waiting, len(q.wait))
	case q.shutdown && (q.n != 0 || len(q.wait) != 0):
		t.Fatalf("shut down with %d queued and %d waiting", q.n, len(q.wait))
	case len(q.wait) > 0 && !q.shutdown && (!q.armed || q.armedAt > q.wait[0].at):
		t.Fatalf("timer armed=%v at %d, but the next key is due at %d", q.armed, q.armedAt, q.wait[0].at)
	}
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

func TestBackoff(t *testing.T) {
	for _, tt := range []struct {
		base, max time.Duration
		n         int
		want      time.Duration
	}{
		{5 * time.Millisecond, 1000 * time.Second, 0, 5 * time.Millisecond},
		{5 * time.Millisecond, 1000 * time.Second, 1, 10 * time.Millisecond},
		{5 * time.Millisecond, 1000 * time.Second, 10, 5120 * time.Millisecond},
		{5 * time.Millisecond, 1000 * time.Second, 17, 655360 * time.Millisecond},
		{5 * time.Millisecond, 1000 * time.Second, 18, 1000 * time.Second},
		{5 * time.Millisecond, 1000 * time.Second, 62, 1000 * time.Second},
		{5 * time.Millisecond, 1000 * time.Second, 1000, 1000 * time.Second},
		{1, time.Duration(1<<63 - 1), 62, 1 << 62},
		{0, time.Second, 5, 0},
	} {
		if got := backoff(tt.base, tt.max, tt.n); got != tt.want {
			t.Errorf("backoff(%v, %v, %d) = %v, want %v", tt.base, tt.max, tt.n, got, tt.want)
		}
	}
}

func TestRateLimiter_BucketGivesABurstThenQPS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewRateLimiter[string](0, 0, 10, 2)
		for i, want := range []time.Duration{0, 0, 100 * time.Millisecond, 200 * time.Millisecond} {
			if got := l.When(""); got != want {
				t.Fatalf("call %d: l.When() = %v, want %v", i, got, want)
			}
		}
		time.Sleep(time.Second) // refills to the burst, not beyond
		for i, want := range []time.Duration{0, 0, 100 * time.Millisecond} {
			if got := l.When(""); got != want {
				t.Fatalf("after 1s, call %d: l.When() = %v, want %v", i, got, want)
			}
		}
		if got := NewRateLimiter[string](0, 0, 0, 0).When(""); got != 0 {
			t.Fatalf("qps 0: l.When() = %v, want 0 (no limit)", got)
		}
	})
}

func TestQueue_LowPriority(t *testing.T) {
	age := QueueOptions[string]{AgeLowPriorityAfter: 10 * time.Millisecond}
	runQueueScripts(t, []queueScript{
		{name: "normal keys go before low ones", script: "low a; low b; add c; get c; get a; get b"},
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

// Once a key was added again while queued, the next adds while it is queued
// return without the queue's lock: here the test holds it.
func TestQueue_AddOfAQueuedKey_TakesNoLock(t *testing.T) {
	q := NewQueue(QueueOptions[string]{})
	defer q.ShutDown()
	q.Add("a")
	q.Add("a")
	q.mu.Lock()
	done := make(chan struct{})
	go func() {
		q.Add("a")
		close(done)
	}()
	select {
	case <-done:
		q.mu.Unlock()
	case <-time.After(10 * time.Second):
		q.mu.Unlock()
		<-done
		t.Fatal("q.Add(a) of a queued key waited for the lock")
	}
	if k, _ := q.Get(); k != "a" || q.Len() != 0 {
		t.Fatalf("q.Get() = %q with %d more queued, want a and none", k, q.Len())
	}
}

func TestQueue_InFlight_WithoutObserver_CountsKeysOnly(t *testing.T) {
	q := NewQueue(QueueOptions[string]{})
	q.Add("a")
	q.Get()
	if n, unfinished, longest := q.InFlight(); n != 1 || unfinished != 0 || longest != 0 {
		t.Fatalf("q.InFlight() = %d, %v, %v, want 1, 0, 0", n, unfinished, longest)
	}
}

func TestQueue_ManyMovesEarlier_KeepOneHeapEntryPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue(QueueOptions[int]{})
		defer q.ShutDown()
		for i := range 10000 {
			q.AddAfter(i%10, time.Hour-time.Duration(i)*time.Millisecond)
		}
		checkQueueInvariants(t, q)
		if n := len(q.wait); n != 10 {
			t.Fatalf("%d heap entries for 10 waiting keys", n)
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
	if len(q.index) != 0 {
		t.Fatalf("%d keys still tracked after shutdown", len(q.index))
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

// Keys that come and go (queued, run, done, queued again), as a controller's
// do, keep their flag for duplicate adds across their lifetimes: steady state
// allocates nothing and does not rebuild the flag map.
func TestQueue_KeyChurn_NoAllocationInSteadyState(t *testing.T) {
	for _, live := range []int{1, 8} {
		q := NewQueue(QueueOptions[int]{})
		i := 0
		round := func() {
			for j := range live {
				k := (i + j) % 64
				q.Add(k)
				q.Add(k)
				q.Add(k)
			}
			for range live {
				k, _ := q.Get()
				q.Done(k)
			}
			i += live
		}
		for range 2000 {
			round()
		}
		if a := testing.AllocsPerRun(2000, round); a != 0 {
			t.Errorf("%d keys live out of 64 in rotation: %.2f allocations per round, want 0", live, a)
		}
	}
}
