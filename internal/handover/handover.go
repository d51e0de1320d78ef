// Package handover is the rule by which the members of a shard group pass
// ranges between them so that no range is ever served by two members at
// once, as a state machine with no I/O:
//
//	h := handover.New("web-0", 64)
//	start, drain := h.Look(owners, others) // owners: who should own each range
//	// write h.Recorded() in this member's Lease, then act:
//	// serve start, stop taking drain's keys and drain them,
//	h.Drained(r) // once range r's in-flight work is done and its objects dropped
//
// Each member records in its own Lease the ranges it claims, serves or
// drains (Recorded). A member takes a range in two looks: it claims it
// only when no other live member records it, and serves it at the next
// look only if still no other member records it; on seeing another's
// record it withdraws. A member that should no longer own a range drains
// it and records its release only then. Because every member writes its
// record before its next look, and a look lists every Lease after that
// write, two members claiming one range cannot both miss each other: the
// later one to list sees the earlier one's claim and withdraws.
//
// A member that dies holds its ranges until its Lease expires; a member
// that cannot renew stops everything (Lost) before its peers judge its
// Lease expired (RenewDeadline < LeaseDuration), so expired records are
// safe to ignore: others must pass only the live members' records.
package handover

// State is what a member does with one range.
type State uint8

const (
	// Idle: not recorded, not served.
	Idle State = iota
	// Claimed: recorded, not served yet; served at the next look if no
	// other member records it.
	Claimed
	// Serving: recorded and served (watched, reconciled).
	Serving
	// Draining: recorded, keys no longer taken, in-flight work finishing;
	// released by Drained.
	Draining
)

var stateNames = [...]string{"idle", "claimed", "serving", "draining"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// Member is one member's side of the handover of n ranges. The zero value
// is not usable; call New. One goroutine owns it.
//
// Invariant: a range is Serving or Draining only after a look that found
// no other member recording it, preceded by a look that Claimed it.
type Member struct {
	self  string
	state []State
}

// New returns the handover of n ranges for member self, every range Idle.
func New(self string, n int) *Member {
	return &Member{self: self, state: make([]State, n)}
}

// Look applies one look at the group: owners[r] is the member that should
// own range r (from the live members, e.g. shardhash.AssignWeighted), and
// others[r] tells whether another live member records r in its Lease. It
// returns the ranges to start serving and the ranges to start draining.
// Write Recorded in this member's Lease after Look and before the next
// Look, and list the Leases for the next Look only after that write.
func (m *Member) Look(owners []string, others []bool) (start, drain []int) {
	for r, s := range m.state {
		mine := r < len(owners) && owners[r] == m.self
		taken := r < len(others) && others[r]
		switch s {
		case Idle:
			if mine && !taken {
				m.state[r] = Claimed
			}
		case Claimed:
			switch {
			case taken || !mine:
				m.state[r] = Idle
			default:
				m.state[r] = Serving
				start = append(start, r)
			}
		case Serving:
			if !mine {
				m.state[r] = Draining
				drain = append(drain, r)
			}
		case Draining:
			// until Drained
		}
	}
	return start, drain
}

// Drained releases range r once its in-flight work has returned (or was
// abandoned by the shutdown rules) and its objects left the cache. Record
// the release (write Recorded) before the new owner may take it.
func (m *Member) Drained(r int) {
	if r >= 0 && r < len(m.state) && m.state[r] == Draining {
		m.state[r] = Idle
	}
}

// Lost makes every range Idle at once: the member lost its Lease and has
// stopped all its work (its peers ignore its records once it expired).
func (m *Member) Lost() {
	clear(m.state)
}

// Recorded is the ranges this member's Lease must record: those it
// claims, serves or drains, in order.
func (m *Member) Recorded() []int {
	var rs []int
	for r, s := range m.state {
		if s != Idle {
			rs = append(rs, r)
		}
	}
	return rs
}

// State is range r's state; Idle if r is out of range.
func (m *Member) State(r int) State {
	if r < 0 || r >= len(m.state) {
		return Idle
	}
	return m.state[r]
}
