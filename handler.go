package kctl

// The events an informer hands to its handlers, and how: each handler has
// its own goroutine and unbounded buffer, in store order.

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

// Event is one change delivered to a handler. Object and Old are the shared
// stored objects: do not modify them. Do not drive persistent state from
// Deleted events (a handler may miss them across restarts): use finalizers.
type Event[T any] struct {
	Type   EventType
	Object *T // the new state; for Deleted, the last known state
	Old    *T // for Updated: the state before
	// Initial marks the Added events of the first list, and the replay of
	// stored objects to a handler added later.
	Initial bool
	// Relisted marks a change found by a relist (after 410 Gone or a
	// reinstalled CRD), not on the watch; a Deleted one's Object is the last
	// state the cache saw.
	Relisted bool
	Resync   bool // the periodic re-delivery of an unchanged object (Old == Object)
}

// event is Event[T] in the informer's core, over P = *T (see typeOps):
// the same fields, so that Event[T](e) converts one.
type event[P any] struct {
	Type     EventType
	Object   P
	Old      P
	Initial  bool
	Relisted bool
	Resync   bool
}

// handler delivers events to one handler function from its own goroutine
// and unbounded buffer (internal/mailbox), in the order they are pushed.
type handler[P any] struct {
	fn  func(event[P])
	box *mailbox.Box[event[P]]
}

func (h *handler[P]) push(e event[P]) { h.box.Push(e) }

func (h *handler[P]) run(ctx context.Context) { h.box.Run(ctx, h.fn) }
