package handover

// What a member saw of its group's Leases: when it first saw each one's
// current version, by its own clock, so that it judges a peer live
// without trusting the peer's clock.

import "time"

// Seen is one Lease as a member saw it last.
type Seen struct {
	Identity        string // the holder; "" once released
	ResourceVersion string
	At              time.Time     // when this version was first seen
	Duration        time.Duration // the Lease's duration
}

// Live reports whether the Lease is live at now: its version changed,
// as far as this member saw, within its duration.
func (s Seen) Live(now time.Time) bool { return now.Sub(s.At) < s.Duration }

// Sightings is what a member saw at its last list of its group's Leases,
// by Lease name. The zero value has seen nothing. Not safe for
// concurrent use.
type Sightings struct {
	seen map[string]Seen
	// listed is when the last list was answered.
	listed time.Time
}

// Observe returns s, a Lease named name listed at s.At, with At moved
// back to when its version was first seen, if the last list had it.
func (g *Sightings) Observe(name string, s Seen) Seen {
	old, ok := g.seen[name]
	if ok && old.ResourceVersion == s.ResourceVersion {
		s.At = old.At
	}
	return s
}

// Listed replaces what was seen with seen, the list answered at now.
func (g *Sightings) Listed(seen map[string]Seen, now time.Time) {
	g.seen = seen
	g.listed = now
}

// NextExpiry is when the first Lease, other than own, that was live at
// the last list expires by what was seen (zero if none), perhaps already
// past: a look then judges it expired at once, not a period later.
func (g *Sightings) NextExpiry(own string) time.Time {
	var first time.Time
	for name, s := range g.seen {
		if s.Identity == "" || name == own {
			continue
		}
		at := s.At.Add(s.Duration)
		judged := !at.After(g.listed)
		later := !first.IsZero() && !at.Before(first)
		if judged || later {
			continue
		}
		first = at
	}
	return first
}
