// Package objprep is what a kctl cache does to each object it decodes
// before it stores it: drop metadata.managedFields (unless
// CacheOptions.KeepManagedFields), then apply the type's transform
// (TransformFor); and what that lets the decoder skip and share.
package objprep

import (
	"github.com/kctl-dev/kctl/internal/objcodec"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Func returns the prepare of a cache's informer over P, a pointer type
// of an API object (a metav1.Object): it drops managedFields unless
// keep, then calls transform, if not nil. It sets wire, the informer's
// decoder, to match: managedFields are not even decoded (protobuf)
// unless keep; and since the cache's objects are read-only, equal maps
// may be decoded once, unless a transform owns (and may change) each
// object it is given.
func Func[P any](keep bool, transform func(P), wire *objcodec.Wire) func(P) {
	wire.SkipManagedFields = !keep
	wire.Reuse = transform == nil
	return func(obj P) {
		if !keep {
			any(obj).(metav1.Object).SetManagedFields(nil)
		}
		if transform != nil {
			transform(obj)
		}
	}
}
