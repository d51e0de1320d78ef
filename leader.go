package kctl

// An extra: leader election on a coordination.k8s.io Lease
// (ElectLeader), through the Manager's elect hook: LeaderElection, the
// options of an election on one Lease; the elector, its state machine
// (acquire, renew, observe another holder, release), is
// internal/election. Sharding elects its group's leader with it too.

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/kctl-dev/kctl/internal/election"
	coordinationv1 "k8s.io/api/coordination/v1"
)

// namespaceFile holds the pod's namespace in a cluster (a variable for tests).
var namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// LeaderElection makes one replica of a Manager, the leader, run the
// controllers while the others wait as warm standbys (caches run everywhere):
//
//	err := mgr.ElectLeader(kctl.LeaderElection{Name: "widget-controller"})
//
// The replicas share a coordination.k8s.io/v1 Lease, written with the
// resourceVersion last read, so of two racing replicas only one wins. A
// standby takes it once released, or once it has seen it unchanged for its
// duration by its own monotonic clock (no other machine's timestamps).
//
//   - A leader that could not renew for RenewDeadline stops at once (its leader
//     context is cancelled), before any standby can judge the lease expired.
//   - On graceful shutdown the lease is renewed until the leader's work has
//     returned (or the Manager abandoned it, see Manager.Start), then
//     released within the Manager's ShutdownTimeout: a standby leads about
//     one RetryPeriod later.
//   - After losing the lease, Manager.Start returns an error matching
//     ErrLeaderLost (let the Deployment restart the process, as with
//     controller-runtime), unless Recampaign makes the replica a standby again.
//
// Only Name is required; the other fields have defaults. The replica needs
// get, create and update on leases.coordination.k8s.io in Namespace.
type LeaderElection struct {
	// the Lease's name; replicas sharing it elect one leader
	Name string
	// the Lease's namespace; defaults to the pod's own (set it outside a cluster)
	Namespace string
	// this replica's name in the Lease, unique; defaults to <hostname>-<random>
	Identity string
	// how long a standby waits, from the last lease change it saw; defaults to 15s
	LeaseDuration time.Duration
	// how long the leader tries to renew before it stops; defaults to 10s,
	// < LeaseDuration
	RenewDeadline time.Duration
	// the interval of renewals and attempts; defaults to 2s, 1.2× < RenewDeadline
	RetryPeriod time.Duration
	// keep the lease on graceful shutdown (standbys wait LeaseDuration);
	// default: release it
	KeepOnShutdown bool
	// after losing the lease campaign again, instead of Manager.Start
	// returning ErrLeaderLost
	Recampaign bool
}

// complete returns c with its defaults filled in, or an error naming the
// field to fix.
func (c LeaderElection) complete() (LeaderElection, error) {
	if c.Name == "" {
		return c, errors.New("kctl: leader election: " +
			"LeaderElection.Name is empty: name the lease, e.g. after the controller")
	}
	if c.Namespace == "" {
		b, err := os.ReadFile(namespaceFile)
		c.Namespace = strings.TrimSpace(string(b))
		if c.Namespace == "" {
			return c, fmt.Errorf("kctl: leader election: "+
				"set LeaderElection.Namespace for lease %q: "+
				"not running in a cluster (%v)", c.Name, err)
		}
	}
	if c.Identity == "" {
		host, _ := os.Hostname()
		suffix := strings.ToLower(rand.Text()[:8])
		c.Identity = cmp.Or(host, "kctl") + "-" + suffix
	}
	c.LeaseDuration = cmp.Or(c.LeaseDuration, 15*time.Second)
	c.RenewDeadline = cmp.Or(c.RenewDeadline, 10*time.Second)
	c.RetryPeriod = cmp.Or(c.RetryPeriod, 2*time.Second)
	negative := c.RetryPeriod < 0
	tooShort := c.LeaseDuration < time.Second
	leaseOK := c.LeaseDuration > c.RenewDeadline
	renewOK := c.RenewDeadline > c.RetryPeriod*6/5
	if negative || tooShort || !leaseOK || !renewOK {
		return c, fmt.Errorf("kctl: leader election: lease %s/%s: "+
			"LeaseDuration (%v) must be greater than RenewDeadline (%v), "+
			"RenewDeadline (%v) must be greater than 1.2 × RetryPeriod (%v), "+
			"durations must be positive and LeaseDuration at least 1s",
			c.Namespace, c.Name, c.LeaseDuration, c.RenewDeadline,
			c.RenewDeadline, c.RetryPeriod)
	}
	return c, nil
}

// leaseStore reads and writes the Lease, updating obj from the answer;
// *Client[coordinationv1.Lease] is one.
type leaseStore = election.Store

// elector is one replica's side of a LeaderElection.
type elector = election.Elector

// newElectorFor makes an elector on store; cfg must be completed.
func newElectorFor(
	store leaseStore,
	cfg LeaderElection,
	log *slog.Logger,
	onChange func(leading bool),
) *elector {
	e := election.New(store, election.Config(cfg), log, onChange)
	e.Lost = ErrLeaderLost
	return e
}

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
	e.ReleaseBy = m.schedule.WritesBy
	m.elect = e.Run
	m.electBy = by
	return nil
}
