// Package rvorder orders Kubernetes resourceVersions, which are
// comparable since Kubernetes 1.35: whether a cache has reached the
// resourceVersion a write returned.
package rvorder

import "k8s.io/apimachinery/pkg/util/resourceversion"

// Check returns an error if rv is not a resourceVersion that can be
// ordered.
func Check(rv string) error {
	_, err := resourceversion.CompareResourceVersion(rv, rv)
	return err
}

// AtLeast reports whether resourceVersion have is rv or newer; one that
// cannot be ordered only if it equals rv.
func AtLeast(have, rv string) bool {
	c, err := resourceversion.CompareResourceVersion(have, rv)
	return err == nil && c >= 0 || have == rv
}
