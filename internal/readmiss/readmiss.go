// Package readmiss is what a kctl Cache does when a cached client read
// wants an informer the cache has not made: refuse it (the cache holds
// the resource's objects in part only, as metadata), fail it
// (CacheOptions.ReaderFailOnMissingInformer), or let the read make it,
// with a warning when that informer caches every object of a type
// nobody scoped (surprise memory use); and the error of a cached Get
// that finds no such object (NotFound).
package readmiss

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/kctl-dev/kctl/internal/apitype"
	"github.com/kctl-dev/kctl/internal/errtext"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ErrNotCached is kctl's ErrNotCached.
var ErrNotCached = errors.New("kctl: type not cached")

// Check returns the error of a cached read of res (its name) that finds
// no informer of it, or nil if the read may make one: refusal, if not
// nil (the cache holds res in part only); else, if failOnMissing, an
// error matching ErrNotCached that names the fix. Else, if the informer
// would hold every object of res (not scoped), it warns on log.
func Check(res string, refusal error, failOnMissing, scoped bool, log *slog.Logger) error {
	if refusal != nil {
		return refusal
	}
	if failOnMissing {
		return fmt.Errorf("kctl: a cached read of %s, which the cache does "+
			"not watch (CacheOptions.ReaderFailOnMissingInformer): "+
			"watch it first (kctl.InformerFor, Owns, Watches), "+
			"or read with Uncached(): %w", res, errtext.Unprefixed(ErrNotCached))
	}
	if !scoped {
		msg := "kctl: a client read started caching every " +
			res + " in the cluster; " +
			"scope it with kctl.ScopeFor, or read with Uncached()"
		log.Warn(msg, "resource", res)
	}
	return nil
}

// NotFound is the error of a cached Get of the object name of res, at
// key (its namespace/name), that the cache does not hold: it matches
// apierrors.IsNotFound, as the server's answer would.
func NotFound(res apitype.Resource, key, name string) error {
	gr := schema.GroupResource{Group: res.Group, Resource: res.Plural}
	nf := apierrors.NewNotFound(gr, name)
	return fmt.Errorf("kctl: get %s %s (from the cache): %w", res, key, nf)
}
