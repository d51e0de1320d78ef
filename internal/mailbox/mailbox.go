// Package mailbox is the unbounded buffer between kctl's informer and
// each of its handlers: the informer pushes under its lock and never
// blocks, and one goroutine per handler takes the values out, oldest
// first, so a slow handler delays only itself and every handler sees
// the values in the order they were pushed.
package mailbox

import (
	"context"
	"sync"
)

// Box holds the values pushed and not yet taken by Run. The zero Box is
// unusable: get one from New. Post is safe for concurrent use; one
// goroutine runs Run.
type Box[E any] struct {
	mu      sync.Mutex
	pending []E           // oldest first
	wake    chan struct{} // holds a token when pending may be non-empty
}

// New returns an empty Box.
func New[E any]() *Box[E] {
	return &Box[E]{wake: make(chan struct{}, 1)}
}

// Post appends e for Run; it never blocks. It is not named Push: generic
// code calls a Push through an interface (kctl's keyqueue), so the linker
// keeps every method of that name of a type that may reach an interface,
// and a Box of each object type would then keep its own copy of it.
func (b *Box[E]) Post(e E) {
	b.mu.Lock()
	b.pending = append(b.pending, e)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Run calls fn with each value pushed, in order, until ctx ends; it
// calls fn with none after ctx ends. It drops its reference to each
// value fn has had, so that the value can be freed.
func (b *Box[E]) Run(ctx context.Context, fn func(E)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.wake:
		}
		b.mu.Lock()
		batch := b.pending
		b.pending = nil
		b.mu.Unlock()
		var none E
		for j, e := range batch {
			if ctx.Err() != nil {
				return
			}
			fn(e)
			batch[j] = none // let the value go
		}
	}
}
