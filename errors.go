package kctl

// How kctl's errors read: each message starts with one "kctl: " and names
// what failed and what to do; a call on a resource the server does not
// serve matches ErrNotInstalled. The first file of the core (doc.go).

import (
	"github.com/kctl-dev/kctl/internal/discovery"
	"github.com/kctl-dev/kctl/internal/errtext"
)

// Every kctl error message starts with exactly one "kctl: ", however deep
// the chain of errors it wraps: an error that wraps another kctl error wraps
// it through unprefixed.
const errPrefix = errtext.Prefix

// unprefixed returns err, whose message may start with "kctl: ", showing its
// message without that prefix, so that a kctl error can wrap it with %w:
//
//	return fmt.Errorf("kctl: controller %q: %w", name, unprefixed(err))
//
// errors.Is and errors.As see through it. unprefixed(nil) is nil.
func unprefixed(err error) error {
	return errtext.Unprefixed(err)
}

// ErrNotInstalled matches (with errors.Is) the error of a call on a resource
// the API server does not serve: a CRD that is not applied, or an API group
// or version that is disabled or too new for the server. For a declared type
// the error says what the server serves in its group version when the
// declaration's Group, Version, Plural or Kind does not match (see
// Declare). Such an error also matches apierrors.IsNotFound, as the server's
// 404 would. It also matches a call on a subresource the server does not
// serve, e.g. UpdateStatus of a CRD without `subresources: {status: {}}`;
// that error does not match IsNotFound, since the object may well exist.
//
// The errors that match it are internal/discovery's *NotServed.
var ErrNotInstalled = discovery.ErrNotInstalled
