// Package causes keeps why each key of kctl's controller is queued: a
// Ledger, whose methods are the rules that move a key's cause (a
// kctl.Trigger: T here) from one of its maps to the next:
//
//	queued  Queue: why each queued key is queued; the first cause since
//	        the key was last taken wins, and later ones merge into it
//	later   Wait: why each key that waits for a time (a retry, a requeue
//	        after a time) comes back when the wait ends
//	taken   Take: the queued cause wins over the later one (a cause that
//	        queued the key while it waited); both are dropped
//	again   Open: for each key being worked on, a channel closed once the
//	        key is queued again meanwhile (Queue); Done forgets it
//	kept    Keep: causes that came while the owner did not run, which
//	        the next run (Reset) queues before anything else
//
// A Ledger is not goroutine-safe: the controller holds its lock around
// every call.
package causes

import (
	"iter"
	"maps"
)

// Ledger holds the causes of an owner's keys. The zero value is ready to
// use.
type Ledger[K comparable, T any] struct {
	queued map[K]*T            // why each queued key is queued
	later  map[K]*T            // why each waiting key comes back
	again  map[K]chan struct{} // for each key worked on: closed if queued again
	kept   map[K]T             // kept while the owner did not run
}

// Queue records t as why k is queued, unless a cause already is: the
// first since k was last taken wins, and merge folds t into it. If k is
// being worked on, its channel (Open) is closed: k is queued again.
func (l *Ledger[K, T]) Queue(k K, t T, merge func(first *T, later T)) {
	ch, ok := l.again[k]
	if ok {
		close(ch)
		delete(l.again, k)
	}
	first, ok := l.queued[k]
	if ok {
		merge(first, t)
		return
	}
	if l.queued == nil {
		l.queued = map[K]*T{}
	}
	l.queued[k] = &t
}

// Wait records t as why k comes back when its wait (a retry, a requeue
// after a time) ends, replacing any such cause of k.
func (l *Ledger[K, T]) Wait(k K, t T) {
	if l.later == nil {
		l.later = map[K]*T{}
	}
	l.later[k] = &t
}

// Take removes k's causes and returns the one that brought k back: the
// queued one, which wins (a cause that queued k while it waited), else
// the wait's (the wait ended); nil if neither is held.
func (l *Ledger[K, T]) Take(k K) *T {
	t, ok := l.queued[k]
	delete(l.queued, k)
	if !ok {
		t = l.later[k]
	}
	delete(l.later, k)
	return t
}

// Open returns a new channel for k, being worked on, which Queue(k)
// closes.
func (l *Ledger[K, T]) Open(k K) chan struct{} {
	if l.again == nil {
		l.again = map[K]chan struct{}{}
	}
	ch := make(chan struct{})
	l.again[k] = ch
	return ch
}

// Done forgets k's channel, if Queue did not close it: its work ended.
func (l *Ledger[K, T]) Done(k K) { delete(l.again, k) }

// Keep keeps t as k's cause while the owner does not run, replacing any
// kept before: nothing else can recreate it.
func (l *Ledger[K, T]) Keep(k K, t T) {
	if l.kept == nil {
		l.kept = map[K]T{}
	}
	l.kept[k] = t
}

// Reset begins a new run of the owner: it drops the queued and waiting
// causes (the last run's queue is gone) and returns the kept ones, which
// the owner queues before anything else, and forgets them.
func (l *Ledger[K, T]) Reset() map[K]T {
	clear(l.queued)
	clear(l.later)
	kept := l.kept
	l.kept = nil
	return kept
}

// Queued is a copy of why k is queued; nil if it is not.
func (l *Ledger[K, T]) Queued(k K) *T { return copyOf(l.queued[k]) }

// Waiting is a copy of why k comes back when its wait ends; nil if none.
func (l *Ledger[K, T]) Waiting(k K) *T { return copyOf(l.later[k]) }

// All is every queued key and its cause.
func (l *Ledger[K, T]) All() iter.Seq2[K, *T] { return maps.All(l.queued) }

func copyOf[T any](t *T) *T {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}
