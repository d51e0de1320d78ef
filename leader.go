package kctl

// An extra: leader election on a coordination.k8s.io Lease
// (ElectLeader), through the Manager's elect hook.

import (
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// ElectLeader makes controllers and runnables that need leadership run only
// on the replica holding the Lease le.Name (see LeaderElection). Caches run
// on every replica, so a standby takes over warm. Call it at most once,
// before Start. It returns an error if le is incomplete or inconsistent
// (naming the field to fix), or after Start. Without it every replica leads.
func (m *Manager) ElectLeader(le LeaderElection) error {
	conn, err := m.leaseConn()
	if err != nil {
		return err
	}
	store := NewClient[coordinationv1.Lease](conn)
	return m.electLeader(le, store, "ElectLeader")
}

// leaseConn is a Conn of its own for the Manager's Leases (ElectLeader,
// Shard), with the Manager's configuration and a rate limit of its own: a
// renewal never waits in the client-side rate limit behind the
// controllers' requests, where a busy replica would lose its Lease (as
// controller-runtime gives leader election a client of its own). Its
// requests count in the same metrics; its warnings go to the same log.
func (m *Manager) leaseConn() (*Conn, error) {
	conn, err := NewConn(m.config)
	if err != nil {
		return nil, err
	}
	conn.requests = m.metrics.Requests
	conn.logWarningsTo(m.log)
	return conn, nil
}

// electLeader is ElectLeader keeping the lease in store (a fake in
// tests); by names the caller (ElectLeader, Shard) for errors.
func (m *Manager) electLeader(le LeaderElection, store leaseStore, by string) error {
	le, err := le.complete()
	if err != nil {
		return err
	}
	onChange := func(leading bool) { m.metrics.SetLeader(le.Name, leading) }
	e := newElectorFor(store, le, m.log, onChange)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.started:
		return fmt.Errorf("kctl: ElectLeader(%q) after Start: "+
			"turn leader election on before calling Start", le.Name)
	case m.electBy == "Shard":
		return fmt.Errorf("kctl: %s(%q) after Shard: call one of "+
			"ElectLeader and Shard", by, le.Name)
	case m.elect != nil:
		return fmt.Errorf("kctl: ElectLeader(%q) called twice: "+
			"a Manager holds one lease", le.Name)
	}
	e.releaseBy = m.shutdown.writesBy
	m.elect = e.run
	m.electBy = by
	return nil
}
