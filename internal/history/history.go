// Package history keeps, per controller, the last entries of each key
// (kctl's KeepHistory): a bounded number of keys, the least recently
// used dropped first, each with a bounded number of entries, the oldest
// dropped first; and, per key, the last thing that dropped an event.
package history

import (
	"container/list"
	"slices"
	"sync"
	"time"
)

// Books holds one Book per controller name, each bounded alike. It is
// safe for concurrent use.
type Books[K comparable, E any] struct {
	perKey, keys int
	mu           sync.Mutex
	byName       map[string]*Book[K, E]
}

// NewBooks returns books of at most keys keys, each with at most perKey
// entries.
func NewBooks[K comparable, E any](perKey, keys int) *Books[K, E] {
	return &Books[K, E]{
		perKey: perKey,
		keys:   keys,
		byName: map[string]*Book[K, E]{},
	}
}

// Of is the book of controller name.
func (b *Books[K, E]) Of(name string) *Book[K, E] {
	b.mu.Lock()
	defer b.mu.Unlock()
	book, ok := b.byName[name]
	if !ok {
		book = &Book[K, E]{
			perKey: b.perKey,
			keys:   b.keys,
			byKey:  map[K]*list.Element{},
		}
		b.byName[name] = book
	}
	return book
}

// Book is one controller's history: at most keys keys, each with at
// most perKey entries. lru holds a *record per key, the most recently
// used first; byKey finds its element. It is safe for concurrent use.
type Book[K comparable, E any] struct {
	perKey, keys int
	mu           sync.Mutex
	lru          list.List
	byKey        map[K]*list.Element
}

// record is a key's entries, oldest first, and its last drop.
type record[K comparable, E any] struct {
	key       K
	entries   []E
	dropped   string
	droppedAt time.Time
}

// recordLocked returns k's record, made and moved to the front.
func (b *Book[K, E]) recordLocked(k K) *record[K, E] {
	e, ok := b.byKey[k]
	if ok {
		b.lru.MoveToFront(e)
		return e.Value.(*record[K, E])
	}
	if b.lru.Len() >= b.keys {
		last := b.lru.Back()
		b.lru.Remove(last)
		delete(b.byKey, last.Value.(*record[K, E]).key)
	}
	r := &record[K, E]{key: k}
	b.byKey[k] = b.lru.PushFront(r)
	return r
}

// Add records entry last in k's history.
func (b *Book[K, E]) Add(k K, entry E) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.recordLocked(k)
	if len(r.entries) >= b.perKey {
		n := copy(r.entries, r.entries[1:])
		r.entries = r.entries[:n]
	}
	r.entries = append(r.entries, entry)
}

// Dropped records what dropped an event for k, at at.
func (b *Book[K, E]) Dropped(k K, by string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.recordLocked(k)
	r.dropped = by
	r.droppedAt = at
}

// Get returns a copy of k's entries, oldest first, and its last drop;
// nothing for a key it does not hold.
func (b *Book[K, E]) Get(k K) (entries []E, dropped string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.byKey[k]
	if !ok {
		return nil, "", time.Time{}
	}
	r := e.Value.(*record[K, E])
	return slices.Clone(r.entries), r.dropped, r.droppedAt
}

// Keys returns the keys held, the most recently used first.
func (b *Book[K, E]) Keys() []K {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]K, 0, b.lru.Len())
	for e := b.lru.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(*record[K, E]).key)
	}
	return out
}
