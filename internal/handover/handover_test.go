package handover

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kctl-dev/kctl/internal/shardhash"
)

func owners(n int, who ...string) []string {
	o := make([]string, n)
	for i := range o {
		o[i] = who[i%len(who)]
	}
	return o
}

// A range is served after two looks that find no other record of it: one
// to claim it, one to check nobody else did.
func TestMember_TakesARangeInTwoLooks(t *testing.T) {
	m := New("a", 2)
	start, _ := m.Look(owners(2, "a"), nil)
	if len(start) != 0 || m.State(0) != Claimed || !slices.Equal(m.Recorded(), []int{0, 1}) {
		t.Fatalf("first look: start %v, state %v, recorded %v; want claims only", start, m.State(0), m.Recorded())
	}
	start, _ = m.Look(owners(2, "a"), nil)
	if !slices.Equal(start, []int{0, 1}) || m.State(1) != Serving {
		t.Fatalf("second look: start %v, state %v; want both served", start, m.State(1))
	}
}

// A member does not claim a range another records, and withdraws a claim
// when another records the range too.
func TestMember_WaitsForAndYieldsToAnotherRecord(t *testing.T) {
	m := New("a", 1)
	m.Look(owners(1, "a"), []bool{true})
	if m.State(0) != Idle {
		t.Fatalf("claimed a range another records: %v", m.State(0))
	}
	m.Look(owners(1, "a"), nil)
	start, _ := m.Look(owners(1, "a"), []bool{true})
	if len(start) != 0 || m.State(0) != Idle || len(m.Recorded()) != 0 {
		t.Fatalf("a claim seeing another record: start %v, state %v; want withdrawn", start, m.State(0))
	}
}

// A range no longer assigned is drained, stays recorded until Drained,
// and is then released; Lost drops everything.
func TestMember_DrainsThenReleases(t *testing.T) {
	m := New("a", 2)
	m.Look(owners(2, "a"), nil)
	m.Look(owners(2, "a"), nil)
	_, drain := m.Look(owners(2, "a", "b"), nil)
	if !slices.Equal(drain, []int{1}) || m.State(1) != Draining {
		t.Fatalf("drain %v, state %v; want range 1 draining", drain, m.State(1))
	}
	m.Look(owners(2, "a", "b"), nil)
	if !slices.Equal(m.Recorded(), []int{0, 1}) {
		t.Fatalf("recorded %v before Drained; want the draining range kept", m.Recorded())
	}
	m.Drained(1)
	if !slices.Equal(m.Recorded(), []int{0}) {
		t.Fatalf("recorded %v after Drained; want it released", m.Recorded())
	}
	m.Lost()
	if len(m.Recorded()) != 0 || m.State(0) != Idle {
		t.Fatalf("after Lost: recorded %v", m.Recorded())
	}
}

// sim is a group of members over a store of Lease records, driven one
// atomic step at a time in a random order: a member lists, looks, writes.
type sim struct {
	n       int
	rng     *rand.Rand
	members map[string]*simMember
	records map[string][]int // the Leases' records, by member; a dead member's until it expires
	weights []int            // the namespaces in each range now
	step    int
}

type simMember struct {
	h      *Member
	alive  bool
	leave  bool // leaving gracefully: owns nothing, leaves once all is released
	stale  []string
	staleN int // looks left with the stale view of the group
	// weights: the namespaces in each range as this member's informer
	// sees them: it catches up with the sim's at random.
	weights []int
	// listed: the others' records as listed, for the next look; nil: list
	// first. A list and the look that uses it are separate steps, so other
	// members' writes fall between them.
	listed []bool
}

// live is the members a correct view sees: alive and not left.
func (s *sim) live() []string {
	var ids []string
	for id, m := range s.members {
		if m.alive && !m.leave {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// list takes a member's snapshot of the others' records (alive or not yet
// expired), for its next look.
func (s *sim) list(id string) {
	others := make([]bool, s.n)
	for other, rs := range s.records {
		if other != id {
			for _, r := range rs {
				others[r] = true
			}
		}
	}
	s.members[id].listed = others
}

// look is one member's look at what it listed, and the write of its
// record: its view of the group (maybe stale) gives the owners.
func (s *sim) look(id string) {
	m := s.members[id]
	view := s.live()
	if m.staleN > 0 {
		view = m.stale
		m.staleN--
	}
	if s.rng.IntN(2) == 0 {
		m.weights = slices.Clone(s.weights)
	}
	own := shardhash.AssignWeighted(view, m.weights)
	if m.leave {
		own = make([]string, s.n)
	}
	_, drain := m.h.Look(own, m.listed)
	m.listed = nil
	for _, r := range drain {
		if s.rng.IntN(2) == 0 {
			m.h.Drained(r) // some drains end at once, others later
		}
	}
	s.records[id] = m.h.Recorded()
}

// check fails t if a range is served or drained by two live members.
func (s *sim) check(t *testing.T) {
	t.Helper()
	holder := make([]string, s.n)
	for id, m := range s.members {
		if !m.alive {
			continue
		}
		for r := range s.n {
			st := m.h.State(r)
			if st != Serving && st != Draining {
				continue
			}
			if holder[r] != "" {
				t.Fatalf("step %d: range %d is %v by %s and held by %s", s.step, r, st, id, holder[r])
			}
			holder[r] = id
		}
	}
}

// Under joins, graceful leaves, deaths, divergent views of the group,
// namespaces coming and going (the ranges' weights) seen by each member
// at its own time, and random interleavings, no range is ever served by
// two members; once views agree and nothing changes, every range is
// served by its assigned owner.
func TestMember_Simulation_NoRangeServedTwice(t *testing.T) {
	for seed := range uint64(30) {
		s := &sim{n: 16, rng: rand.New(rand.NewPCG(seed, 99)), members: map[string]*simMember{}, records: map[string][]int{}}
		s.weights = make([]int, s.n)
		for range 40 {
			s.weights[s.rng.IntN(s.n)]++
		}
		next := 0
		join := func() {
			id := fmt.Sprintf("m%d", next)
			next++
			s.members[id] = &simMember{h: New(id, s.n), alive: true, weights: slices.Clone(s.weights)}
		}
		join()
		for s.step = 0; s.step < 3000; s.step++ {
			ids := slices.Sorted(func(yield func(string) bool) {
				for id, m := range s.members {
					if m.alive && !yield(id) {
						return
					}
				}
			})
			if len(ids) == 0 {
				join()
				continue
			}
			switch p := s.rng.IntN(100); {
			case p < 3 && len(ids) < 5:
				join()
			case p < 5 && len(ids) > 1:
				victim := s.members[ids[s.rng.IntN(len(ids))]]
				victim.alive = false // SIGKILL: it serves nothing from now on
			case p < 7 && len(ids) > 1:
				s.members[ids[s.rng.IntN(len(ids))]].leave = true
			case p < 10:
				// a member's view lags: it still sees the group of now for a while
				m := s.members[ids[s.rng.IntN(len(ids))]]
				m.stale = s.live()
				m.staleN = s.rng.IntN(20)
			case p < 16:
				// a namespace is created or deleted: one range's weight changes
				r := s.rng.IntN(s.n)
				s.weights[r] = max(0, s.weights[r]+s.rng.IntN(3)-1)
			case p < 19:
				// a dead member's Lease expires: its records stop counting
				for id, m := range s.members {
					if !m.alive {
						delete(s.records, id)
						delete(s.members, id)
					}
				}
			default:
				id := ids[s.rng.IntN(len(ids))]
				m := s.members[id]
				if m.listed == nil {
					s.list(id)
					continue
				}
				s.look(id)
				if m.leave && len(m.h.Recorded()) == 0 {
					delete(s.records, id) // graceful leave: the Lease is deleted
					delete(s.members, id)
				}
			}
			s.check(t)
		}
		// settle: the dead expire, views agree, drains end, everyone looks
		for id, m := range s.members {
			if !m.alive {
				delete(s.records, id)
				delete(s.members, id)
			}
		}
		for range 10 {
			for id, m := range s.members {
				m.staleN = 0
				m.weights = slices.Clone(s.weights)
				for r := range s.n {
					m.h.Drained(r)
				}
				s.list(id)
				s.look(id)
				if m.leave && len(m.h.Recorded()) == 0 {
					delete(s.records, id)
					delete(s.members, id)
				}
				s.check(t)
			}
		}
		want := shardhash.AssignWeighted(s.live(), s.weights)
		for r := range s.n {
			if want[r] == "" {
				continue
			}
			if st := s.members[want[r]].h.State(r); st != Serving {
				t.Fatalf("seed %d: after settling, range %d is %v by its owner %s", seed, r, st, want[r])
			}
		}
	}
}

// A live member's record marks its ranges taken; one that cannot be read
// marks every range, so that no member takes a range it cannot prove free.
func TestMarkTaken_UnreadableRecordTakesEveryRange(t *testing.T) {
	taken := make([]bool, 4)
	MarkTaken(taken, "1,3")
	if want := []bool{false, true, false, true}; !slices.Equal(taken, want) {
		t.Errorf("MarkTaken(\"1,3\") = %v, want %v", taken, want)
	}
	taken = make([]bool, 4)
	MarkTaken(taken, "1,9")
	if want := []bool{true, true, true, true}; !slices.Equal(taken, want) {
		t.Errorf("MarkTaken(\"1,9\") of 4 ranges = %v, want every range", taken)
	}
}
