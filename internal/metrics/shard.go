package metrics

import (
	"sync/atomic"

	"github.com/kctl-dev/kctl/internal/prom"
)

// Shard are one shard member's series, by group:
//
//	s := m.Shard("podcount")
//	s.Members.Store(3)
//	s.Owned.Store(21)
//	s.Handovers.Add(1)
//
// Members is the live members this member sees, Owned the ranges it
// serves, Handovers the ranges it started serving or released. Safe for
// concurrent use.
type Shard struct {
	group     string
	Members   atomic.Int64
	Owned     atomic.Int64
	Handovers atomic.Uint64
}

// Shard returns the series of shard group group, shown from the first
// call on (every series at zero).
func (m *Registry) Shard(group string) *Shard {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shards == nil {
		m.shards = map[string]*Shard{}
	}
	s := m.shards[group]
	if s == nil {
		s = &Shard{group: group}
		m.shards[group] = s
	}
	return s
}

// collect adds the kctl_shard_* series of s.
func (s *Shard) collect(p *prom.Page) {
	g := []string{"group", s.group}
	p.Gauge("kctl_shard_members",
		"Number of live members of the shard group, as "+
			"this member saw them at its last look.",
		float64(s.Members.Load()), g...)
	p.Gauge("kctl_shard_ranges_owned",
		"Number of the group's ranges this member "+
			"serves (reconciles and caches).",
		float64(s.Owned.Load()), g...)
	p.Counter("kctl_shard_handovers_total",
		"Total number of ranges this member started "+
			"serving or released to another member.",
		float64(s.Handovers.Load()), g...)
}

// NotOwned counts one key a shard member skipped, as
// kctl_shard_keys_skipped_total{controller}.
func (cm *Controller) NotOwned() { cm.notOwned.Add(1) }

// collectSkipped adds kctl_shard_keys_skipped_total once a key was
// skipped: a shard member's controllers only.
func (cm *Controller) collectSkipped(p *prom.Page) {
	skipped := cm.notOwned.Load()
	if skipped == 0 {
		return
	}
	p.Counter("kctl_shard_keys_skipped_total",
		"Total number of keys per controller that a "+
			"shard member took from its queue and "+
			"skipped: another member owns them",
		float64(skipped), "controller", cm.name)
}
