package kctl

// The events an informer hands to its handlers, and how: each handler has
// its own goroutine and unbounded buffer, in store order. Event[T], the
// event as a user's handler takes it, is informer_more.go's.

import (
	"context"

	"github.com/kctl-dev/kctl/internal/mailbox"
)

// EventType says what happened to an object.
type EventType int

const (
	Added EventType = iota
	Updated
	Deleted
)

// String is "Added", "Updated" or "Deleted".
func (t EventType) String() string { return [...]string{"Added", "Updated", "Deleted"}[t] }

// event is one change delivered to a handler, over P = *T (see typeOps):
// Event[T]'s fields (informer_more.go, where a user's handler takes it),
// so that Event[T](e) converts one. Object and Old are the shared stored
// objects: never modify them.
type event[P any] struct {
	Type     EventType
	Object   P    // the new state; for Deleted, the last known state
	Old      P    // for Updated: the state before
	Initial  bool // an Added of the first list, or of a replay
	Relisted bool // found by a relist, not on the watch
	Resync   bool // the periodic re-delivery (Old == Object)
}

// handler delivers events to one handler function from its own goroutine
// and unbounded buffer (internal/mailbox), in the order they are pushed.
type handler[P any] struct {
	fn  func(event[P])
	box *mailbox.Box[event[P]]
}

func (h *handler[P]) push(e event[P]) { h.box.Post(e) }

func (h *handler[P]) run(ctx context.Context) { h.box.Run(ctx, h.fn) }
