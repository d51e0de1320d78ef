package kctl

// An extra (sharding): ShardOptions, what a replica of a sharded group is.
// Membership is in shard_members.go, the assignment of ranges in
// shard_assign.go, the probe of the server in shard_probe.go.

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ShardGroupLabel labels the Leases of a shard group with the group's name:
// each member holds one, named <group>-<identity>.
const ShardGroupLabel = "kctl.dev/shard-group"

// ShardOptions describe one replica of a group of replicas running the same
// program and sharing its work, each holding a Lease of its own:
//
//	opts := kctl.ShardOptions{Group: "podcount", Namespace: "podcount-system"}
//
// The live members of the group are the Leases labelled
// ShardGroupLabel=<Group> in Namespace that this replica has seen renewed
// within their duration, by its own monotonic clock (no other machine's
// timestamps), as LeaderElection judges a leader. The hash space of the
// objects' uids is cut into Ranges equal ranges, assigned to the members.
//
// Only Group is required; the other fields have defaults. The replica needs
// get, list, create, update and delete on leases.coordination.k8s.io in
// Namespace.
type ShardOptions struct {
	// the group's name: a label value, and the prefix of its Leases' names
	Group string
	// the Leases' namespace; defaults to the pod's own (set it outside a
	// cluster)
	Namespace string
	// this replica's name in the group, unique in it; defaults to
	// <hostname>-<random> (a StatefulSet's pod name keeps its Lease across
	// restarts)
	Identity string
	// how many ranges the hash space is cut into; defaults to 64, at most
	// 1024. Every member of a group must use the same.
	Ranges int
	// how long a Lease stays live unrenewed; defaults to 15s
	LeaseDuration time.Duration
	// how long a member tries to renew before it stops all its work;
	// defaults to 10s, < LeaseDuration
	RenewDeadline time.Duration
	// the interval of renewals and of looks at the group; defaults to 2s,
	// 1.2× < RenewDeadline
	RenewPeriod time.Duration
}

// complete returns o with its defaults filled in, or an error naming the
// field to fix.
func (o ShardOptions) complete() (ShardOptions, error) {
	if o.Group == "" {
		return o, errors.New("kctl: sharding: ShardOptions.Group is " +
			"empty: name the group, e.g. after the controller")
	}
	if o.Namespace == "" {
		b, err := os.ReadFile(namespaceFile)
		o.Namespace = strings.TrimSpace(string(b))
		if o.Namespace == "" {
			return o, fmt.Errorf("kctl: sharding: set "+
				"ShardOptions.Namespace for group %q: "+
				"not running in a cluster (%v)", o.Group, err)
		}
	}
	if o.Identity == "" {
		host, _ := os.Hostname()
		suffix := strings.ToLower(rand.Text()[:8])
		host = strings.ToLower(host)
		o.Identity = cmp.Or(host, "kctl") + "-" + suffix
	}
	o.Ranges = cmp.Or(o.Ranges, 64)
	o.LeaseDuration = cmp.Or(o.LeaseDuration, 15*time.Second)
	o.RenewDeadline = cmp.Or(o.RenewDeadline, 10*time.Second)
	o.RenewPeriod = cmp.Or(o.RenewPeriod, 2*time.Second)
	err := o.check()
	return o, err
}

// check validates a completed o.
func (o ShardOptions) check() error {
	bad := validation.IsValidLabelValue(o.Group)
	if len(bad) > 0 {
		return fmt.Errorf("kctl: sharding: ShardOptions.Group %q "+
			"is not a label value: %s", o.Group, bad[0])
	}
	bad = validation.IsDNS1123Subdomain(o.leaseName())
	if len(bad) > 0 {
		return fmt.Errorf("kctl: sharding: the Lease name %q "+
			"(<Group>-<Identity>) is not a valid name: %s; "+
			"choose a lowercase Group and Identity",
			o.leaseName(), bad[0])
	}
	if o.Ranges < 1 || o.Ranges > 1024 {
		return fmt.Errorf("kctl: sharding: group %q: "+
			"ShardOptions.Ranges is %d; give 1 to 1024",
			o.Group, o.Ranges)
	}
	negative := o.RenewPeriod < 0
	tooShort := o.LeaseDuration < time.Second
	leaseOK := o.LeaseDuration > o.RenewDeadline
	renewOK := o.RenewDeadline > o.RenewPeriod*6/5
	if negative || tooShort || !leaseOK || !renewOK {
		return fmt.Errorf("kctl: sharding: group %q: "+
			"LeaseDuration (%v) must be greater than "+
			"RenewDeadline (%v), RenewDeadline must be greater "+
			"than 1.2 × RenewPeriod (%v), durations must be "+
			"positive and LeaseDuration at least 1s",
			o.Group, o.LeaseDuration, o.RenewDeadline,
			o.RenewPeriod)
	}
	return nil
}

// leaseName is the name of this member's Lease.
func (o ShardOptions) leaseName() string {
	return o.Group + "-" + o.Identity
}
