package kctl

import (
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

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
		if n := q.waiting.Len(); n != 10 {
			t.Fatalf("%d heap entries for 10 waiting keys", n)
		}
	})
}
