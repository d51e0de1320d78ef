package kctl

// An extra (sharding): the members of a shard group, one Lease each.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// errShardLeaseLost: this member's Lease was deleted or taken while it
// held it (a peer judged it expired): the member must stop all its work at
// once, as a leader that lost its lease does.
var errShardLeaseLost = errors.New("kctl: sharding: this member's " +
	"Lease was deleted or changed by another process")

// memberStore reads and writes the group's Leases, updating obj from the
// answer; *Client[coordinationv1.Lease] is one.
type memberStore interface {
	Get(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)
	List(ctx context.Context, opts ListOptions) ([]*coordinationv1.Lease, error)
	Create(ctx context.Context, obj *coordinationv1.Lease) error
	Update(ctx context.Context, obj *coordinationv1.Lease) error
	DeleteWithOptions(ctx context.Context, namespace, name string, opts DeleteOptions) error
}

// shardMembers is one member's view of its group: its own Lease and what
// it saw of the others. One goroutine owns it; it is not safe for
// concurrent use.
//
// Invariants: own is nil before join and after leave, else the Lease as
// last written. seen holds, for each Lease of the group listed last time,
// its resourceVersion and the local time at which this member first saw
// that version; a Lease is live while now - that time < its duration.
type shardMembers struct {
	cfg   ShardOptions // completed
	store memberStore
	now   func() time.Time // time.Now; a fake clock in tests
	own   *coordinationv1.Lease
	seen  map[string]seenLease
}

// seenLease is one Lease as this member saw it last.
type seenLease struct {
	identity        string
	resourceVersion string
	at              time.Time // when this version was first seen
	duration        time.Duration
}

// newShardMembers makes the view of a member; cfg must be completed.
func newShardMembers(cfg ShardOptions, store memberStore) *shardMembers {
	return &shardMembers{
		cfg:   cfg,
		store: store,
		now:   time.Now,
		seen:  map[string]seenLease{},
	}
}

// join creates this member's Lease, or takes it over if this identity left
// one behind (a restarted StatefulSet pod): a member is one identity.
func (m *shardMembers) join(ctx context.Context) error {
	now := metav1.NewMicroTime(m.now())
	name := m.cfg.leaseName()
	old, err := m.store.Get(ctx, m.cfg.Namespace, name)
	notFound := apierrors.IsNotFound(err)
	if err != nil && !notFound {
		return m.failed("read", err)
	}
	l := &coordinationv1.Lease{}
	if !notFound {
		l = old
	}
	l.Name = name
	l.Namespace = m.cfg.Namespace
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[ShardGroupLabel] = m.cfg.Group
	secs := int32(m.cfg.LeaseDuration / time.Second)
	l.Spec.HolderIdentity = new(m.cfg.Identity)
	l.Spec.LeaseDurationSeconds = new(secs)
	l.Spec.AcquireTime = &now
	l.Spec.RenewTime = &now
	if notFound {
		err = m.store.Create(ctx, l)
	} else {
		err = m.store.Update(ctx, l)
	}
	if err != nil {
		return m.failed("create", err)
	}
	m.own = l
	return nil
}

// renew writes a new renewTime on this member's Lease, over the version it
// last wrote. errShardLeaseLost if another process deleted or changed it.
func (m *shardMembers) renew(ctx context.Context) error {
	if m.own == nil {
		return errors.New("kctl: sharding: renew before join")
	}
	l := m.own.DeepCopy()
	now := metav1.NewMicroTime(m.now())
	l.Spec.RenewTime = &now
	err := m.store.Update(ctx, l)
	gone := apierrors.IsNotFound(err)
	taken := apierrors.IsConflict(err)
	if gone || taken {
		m.own = nil
		return fmt.Errorf("%w: %w", errShardLeaseLost, err)
	}
	if err != nil {
		return m.failed("renew", err)
	}
	m.own = l
	return nil
}

// leave deletes this member's Lease, if it is still the one it wrote:
// the others see the member gone at their next look, without waiting for
// it to expire.
func (m *shardMembers) leave(ctx context.Context) error {
	if m.own == nil {
		return nil
	}
	opts := DeleteOptions{UID: m.own.UID}
	err := m.store.DeleteWithOptions(
		ctx, m.own.Namespace, m.own.Name, opts)
	m.own = nil
	if err != nil && !apierrors.IsNotFound(err) {
		return m.failed("delete", err)
	}
	return nil
}

// live lists the group's Leases and returns the identities of its live
// members, sorted: this member's own while it holds its Lease, and every
// other whose Lease it has seen change within the Lease's duration. A Lease
// it judges expired is deleted, guarded by its resourceVersion (a renewal
// in between wins), so the group does not collect the Leases of dead
// replicas.
func (m *shardMembers) live(ctx context.Context) ([]string, error) {
	sel := labels.SelectorFromSet(labels.Set{
		ShardGroupLabel: m.cfg.Group,
	})
	list, err := m.store.List(ctx, ListOptions{
		Namespace: m.cfg.Namespace,
		Labels:    sel,
	})
	if err != nil {
		return nil, m.failed("list", err)
	}
	now := m.now()
	seen := make(map[string]seenLease, len(list))
	var ids []string
	var expired []*coordinationv1.Lease
	for _, l := range list {
		s := m.observe(l, now)
		seen[l.Name] = s
		switch {
		case s.identity == "":
			// released: not a member
		case m.own != nil && l.Name == m.own.Name:
			ids = append(ids, m.cfg.Identity)
		case now.Sub(s.at) < s.duration:
			ids = append(ids, s.identity)
		default:
			expired = append(expired, l)
		}
	}
	m.seen = seen
	if m.own != nil && !slices.Contains(ids, m.cfg.Identity) {
		// our Lease is not listed: deleted by a peer
		m.own = nil
		return nil, errShardLeaseLost
	}
	for _, l := range expired {
		m.forget(ctx, l)
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// observe returns what this member knows of l at now: when it first saw
// l's current version.
func (m *shardMembers) observe(
	l *coordinationv1.Lease,
	now time.Time,
) seenLease {
	s := seenLease{
		resourceVersion: l.ResourceVersion,
		at:              now,
		duration:        m.cfg.LeaseDuration,
	}
	if l.Spec.HolderIdentity != nil {
		s.identity = *l.Spec.HolderIdentity
	}
	secs := l.Spec.LeaseDurationSeconds
	if secs != nil && *secs > 0 {
		s.duration = time.Duration(*secs) * time.Second
	}
	old, ok := m.seen[l.Name]
	if ok && old.resourceVersion == l.ResourceVersion {
		s.at = old.at
	}
	return s
}

// forget deletes the expired Lease l unless it changed since it was
// listed. Errors are ignored: another member may have deleted it first,
// and the next look tries again.
func (m *shardMembers) forget(
	ctx context.Context,
	l *coordinationv1.Lease,
) {
	opts := DeleteOptions{
		UID:             l.UID,
		ResourceVersion: l.ResourceVersion,
	}
	_ = m.store.DeleteWithOptions(ctx, l.Namespace, l.Name, opts)
}

// failed wraps err from verb on the group's Leases, naming the permission
// when it is Forbidden.
func (m *shardMembers) failed(verb string, err error) error {
	where := m.cfg.Namespace + "/" + m.cfg.leaseName()
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("kctl: sharding: %s Lease %s: %w (the "+
			"replica needs get, list, create, update and delete "+
			"on leases.coordination.k8s.io in namespace %s)",
			verb, where, err, m.cfg.Namespace)
	}
	return fmt.Errorf("kctl: sharding: %s Lease %s: %w",
		verb, where, err)
}
