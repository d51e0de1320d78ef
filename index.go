package kctl

// An extra: field indexes declared on the Manager (IndexField) and the
// field selector that lists by one (MatchingField), as
// controller-runtime's FieldIndexer and client.MatchingFields.

import (
	"fmt"

	"k8s.io/apimachinery/pkg/fields"
)

// IndexField declares an index of the cached objects of type T, named
// field: fn returns the values an object is filed under, the same each
// time for the same object. A cached List (of a ClientFor client, or of
// the informer) answers a field selector on field from it:
//
//	err := kctl.IndexField(mgr, "spec.nodeName", func(p *corev1.Pod) []string {
//		return []string{p.Spec.NodeName}
//	})
//	...
//	pods.List(ctx, kctl.ListOptions{Fields: kctl.MatchingField("spec.nodeName", node)})
//
// Declare indexes before Start (right after NewManager), so that they are
// not built from a full cache under its lock. It makes T's informer, as a
// controller or a source of T would. An index name is the cache's, not the
// server's: Uncached() reads send the selector to the server, which knows
// only its own field labels (metadata.name, metadata.namespace and a few
// per type, e.g. spec.nodeName of a Pod). It fails, naming T and field, if
// T is not an API type or field is empty or already indexed.
func IndexField[T any, PT Object[T]](m *Manager, field string, fn func(obj *T) []string) error {
	if field == "" {
		return fmt.Errorf("kctl: IndexField: the field name is empty: " +
			"name the index, e.g. \"spec.nodeName\"")
	}
	inf, err := InformerFor[T, PT](m.cache)
	if err != nil {
		return fmt.Errorf("kctl: IndexField(%q): %w", field, unprefixed(err))
	}
	return inf.AddIndex(field, fn)
}

// MatchingField is the field selector that requires field to equal value,
// with value escaped, so that a value with "," or "=" in it selects
// itself and nothing else:
//
//	kctl.ListOptions{Namespace: ns, Fields: kctl.MatchingField("spec.owner", "a=b,c")}
//
// Join several with ",". A cached List answers it from the index named
// field (IndexField).
func MatchingField(field, value string) string {
	return fields.OneTermEqualSelector(field, value).String()
}
