package kctl

// Field selectors in cached reads. The server evaluates a field selector
// against fields each resource type chooses to support; the cache holds
// decoded Go values and evaluates only what it can answer exactly: the
// object's name and namespace, and fields that have an index of the same name
// (Informer.AddIndex("spec.nodeName", ...), as controller-runtime's
// IndexField). Any other requirement is an error naming it, never ignored.

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"
)

// fieldReq is one requirement of a field selector that the cache answers.
// It is decided by the object's key alone.
type fieldReq[T any] struct {
	field, value string
	equal        bool      // = or ==; false for !=
	ix           *index[T] // the index named field; nil for metadata.name and metadata.namespace
}

// matches reports whether the object stored under k meets the requirement.
func (f fieldReq[T]) matches(k objKey) bool {
	var in bool
	switch {
	case f.ix != nil:
		_, in = f.ix.values[f.value][k]
	case f.field == "metadata.name":
		in = k.name == f.value
	default:
		in = k.namespace == f.value
	}
	return in == f.equal
}

// fieldReqs parses selector for a List of s, whose objects were all listed
// with the field selector scope. A requirement that scope holds already is
// met by every object and left out. Call it with s's lock held: the
// requirements point at s's indexes.
func (s *store[T]) fieldReqs(selector, scope string) ([]fieldReq[T], error) {
	if strings.TrimSpace(selector) == "" {
		return nil, nil
	}
	sel, err := fields.ParseSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("kctl: bad field selector %q: %w", selector, err)
	}
	var held fields.Requirements
	if s, err := fields.ParseSelector(scope); err == nil {
		held = s.Requirements()
	}
	var out []fieldReq[T]
	var unknown []string
	for _, r := range sel.Requirements() {
		if containsReq(held, r) {
			continue
		}
		f := fieldReq[T]{field: r.Field, value: r.Value, equal: r.Operator != selection.NotEquals}
		if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
			if !strings.HasPrefix(r.Field, "\x00") {
				f.ix = s.indexes[r.Field]
			}
			if f.ix == nil {
				unknown = append(unknown, r.Field)
				continue
			}
		}
		out = append(out, f)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("kctl: the cache cannot evaluate field selector %q: %s has no index; "+
			"a cached List answers metadata.name, metadata.namespace and fields with an index of the same name "+
			"(e.g. AddIndex(%q, fn) on the informer, before Start): add one, or list with Uncached()",
			selector, strings.Join(unknown, ", "), unknown[0])
	}
	return out, nil
}

func containsReq(reqs fields.Requirements, r fields.Requirement) bool {
	for _, h := range reqs {
		if h.Field == r.Field && h.Value == r.Value && (h.Operator == selection.NotEquals) == (r.Operator == selection.NotEquals) {
			return true
		}
	}
	return false
}
