package kctl

// What a Queue tells of itself beyond the data path (floor 2): whether it
// shuts down, and when a waiting key comes back (for KeepHistory). The
// data path (queue.go) calls neither.

import "time"

// ShuttingDown reports whether ShutDown was called.
func (q *Queue[K]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.keys.Closed()
}

// WaitingUntil reports when k's wait to be added ends, if k waits
// (AddAfter, AddRateLimited, Debounce, MinInterval).
func (q *Queue[K]) WaitingUntil(k K) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.keys.WaitingUntil(k)
}
