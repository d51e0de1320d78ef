package kctl

import (
	"testing"
	"testing/synctest"
	"time"
)

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
