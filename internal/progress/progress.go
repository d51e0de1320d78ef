// Package progress is how the readers of a kctl informer wait for it and
// learn what it waits for: a broadcast of its progress (Signal), a wait
// for a condition of its state under its lock (Wait), and the error that
// says why it is not ready (Err), for readiness checks.
package progress

import (
	"context"
	"fmt"
	"sync"

	"github.com/kctl-dev/kctl/internal/errtext"
)

// Signal wakes the goroutines that wait for progress. The owner's lock
// guards it; the zero Signal has no waiter.
type Signal struct {
	// ch is closed on any progress; nil when nobody waits.
	ch chan struct{}
}

// Notify wakes every waiter. Call it with the owner's lock held.
func (s *Signal) Notify() {
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// State is what Wait asks of the owner, called with its lock held:
// whether the condition holds, whether the owner stopped, and its last
// failure (nil if none).
type State func() (done, stopped bool, failure error)

// Wait returns once state says done, asking it under mu at the start and
// after each Notify of s, or with an error saying why not when the owner
// stops or ctx ends (naming the owner's failure, if any). name names the
// owner (e.g. "cache of pods/v1"), what the condition (e.g. "sync").
func Wait(
	ctx context.Context,
	mu sync.Locker,
	s *Signal,
	name, what string,
	state State,
) error {
	for {
		mu.Lock()
		done, stopped, failure := state()
		if done || stopped {
			mu.Unlock()
			if done {
				return nil
			}
			return fmt.Errorf("kctl: %s stopped before it could %s", name, what)
		}
		if s.ch == nil {
			s.ch = make(chan struct{})
		}
		progress := s.ch
		mu.Unlock()
		select {
		case <-progress:
		case <-ctx.Done():
			if failure != nil {
				cause := errtext.Unprefixed(failure)
				return fmt.Errorf("kctl: %s did not %s: %w (%w)",
					name, what, cause, ctx.Err())
			}
			return fmt.Errorf("kctl: %s did not %s: %w", name, what, ctx.Err())
		}
	}
}

// Err is nil for an owner that is started, not stopped, synced and
// healthy; else it says what the owner (named name) waits for: its
// failure, if any, else that it is not started, is stopped, or is still
// syncing.
func Err(name string, failure error, started, stopped, synced bool) error {
	switch {
	case failure != nil:
		return failure
	case !started:
		return fmt.Errorf("kctl: %s is not started: start the Cache", name)
	case stopped:
		return fmt.Errorf("kctl: %s is stopped", name)
	case !synced:
		return fmt.Errorf("kctl: %s is still syncing", name)
	}
	return nil
}
