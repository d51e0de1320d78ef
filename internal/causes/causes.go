// Package causes keeps why each key of kctl's controller is queued, in
// plain maps whose methods are the rules that move a key's cause (a
// kctl.Trigger: T here) from one map to the next. A controller keeps two
// ByKey maps and an Again:
//
//	queued  ByKey.Add: why each queued key is queued; the first cause since
//	        the key was last taken wins, and later ones merge into it
//	later   why each key that waits for a time (a retry, a requeue after a
//	        time) comes back when the wait ends
//	taken   ByKey.Take: the queued cause wins over the later one (a cause that
//	        queued the key while it waited); both are dropped
//	again   Again: for each key being worked on, a channel closed once the
//	        key is queued again meanwhile
//
// The maps are made by their owner, as any map, and are not
// goroutine-safe: the controller holds its lock around every call.
package causes

// ByKey holds a cause for each key: why it is queued, or why its wait
// brings it back.
type ByKey[K comparable, T any] map[K]*T

// Add records t as why k is queued, unless a cause already is: the
// first since k was last taken wins, and merge folds t into it.
func (m ByKey[K, T]) Add(k K, t T, merge func(first *T, later T)) {
	first, ok := m[k]
	if ok {
		merge(first, t)
		return
	}
	m[k] = &t
}

// Take removes k's cause from m and from later, and returns the one that
// brought k back: m's, which wins (a cause that queued k while it waited),
// else later's (the wait ended); nil if neither holds one.
func (m ByKey[K, T]) Take(k K, later ByKey[K, T]) *T {
	t, ok := m[k]
	delete(m, k)
	if !ok {
		t = later[k]
	}
	delete(later, k)
	return t
}

// Again holds, for each key being worked on, a channel that Close closes
// if the key is queued again meanwhile. The owner deletes a key's
// channel when its work ends.
type Again[K comparable] map[K]chan struct{}

// Open returns a new channel for k, which Close(k) closes.
func (a Again[K]) Open(k K) chan struct{} {
	ch := make(chan struct{})
	a[k] = ch
	return ch
}

// Close closes k's channel, if it has one, and forgets it: k is queued
// again while it is worked on.
func (a Again[K]) Close(k K) {
	ch, ok := a[k]
	if ok {
		close(ch)
		delete(a, k)
	}
}
