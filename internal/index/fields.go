package index

// The field selectors a cached List answers: parsed, without the
// requirements the informer's own scope holds, and the error naming
// what to do about a field the cache cannot evaluate.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kctl-dev/kctl/internal/fieldlabel"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"
)

// Req is one requirement of a field selector: Field = Value (Equal) or
// Field != Value.
type Req struct {
	Field, Value string
	Equal        bool
}

// Parse parses selector for a List of a cache whose objects were all
// listed with the field selector scope: the requirements scope holds
// (which every object meets) are left out.
func Parse(selector, scope string) ([]Req, error) {
	if strings.TrimSpace(selector) == "" {
		return nil, nil
	}
	sel, err := fields.ParseSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("kctl: bad field selector %q: %w",
			selector, err)
	}
	held := scopeReqs(scope)
	var reqs []Req
	for _, r := range sel.Requirements() {
		if containsReq(held, r) {
			continue
		}
		equal := r.Operator != selection.NotEquals
		reqs = append(reqs, Req{r.Field, r.Value, equal})
	}
	return reqs, nil
}

// scopeReqs is the requirements of scope, an informer's field selector.
func scopeReqs(scope string) fields.Requirements {
	sel, err := fields.ParseSelector(scope)
	if err != nil {
		return nil
	}
	return sel.Requirements()
}

func containsReq(reqs fields.Requirements, r fields.Requirement) bool {
	notEq := r.Operator == selection.NotEquals
	for _, h := range reqs {
		same := h.Field == r.Field && h.Value == r.Value
		if same && (h.Operator == selection.NotEquals) == notEq {
			return true
		}
	}
	return false
}

// Unindexed is the error of a cached List of resource res (of API group
// and kind) by fields in unknown, which have no index, suggesting only
// what works: an index (IndexField) always; Uncached() if the server
// filters res by each (internal/fieldlabel, or the scope, a field
// selector the server took). A custom (declared) type's CRD may add
// field labels (selectableFields) only the server knows.
func Unindexed(
	group, kind, res string,
	custom bool,
	selector, scope string,
	unknown []string,
) error {
	msg := fmt.Sprintf("kctl: the cache cannot evaluate field selector %q: "+
		"%s has no index (a cached List answers metadata.name, "+
		"metadata.namespace and fields with an index of the same name): "+
		"declare one with kctl.IndexField(mgr, %q, fn) "+
		"(or AddIndex on the informer) before Start",
		selector, strings.Join(unknown, ", "), unknown[0])
	var scoped []string
	for _, r := range scopeReqs(scope) {
		scoped = append(scoped, r.Field)
	}
	server := fieldlabel.Server(group, kind, scoped)
	notServer := slices.DeleteFunc(slices.Clone(unknown), func(f string) bool {
		return slices.Contains(server, f)
	})
	if len(notServer) == 0 {
		return fmt.Errorf("%s, or list with Uncached() (the API server "+
			"filters %s by %s)", msg, res, strings.Join(unknown, ", "))
	}
	known := strings.Join(server, ", ")
	missing := strings.Join(notServer, ", ")
	if custom {
		return fmt.Errorf("%s; an Uncached() List works only if the "+
			"CRD of %s lists %s in selectableFields (the API server "+
			"filters it by %s and those)", msg, res, missing, known)
	}
	return fmt.Errorf("%s; not Uncached(): the API server filters %s "+
		"only by %s, not by %s", msg, res, known, missing)
}
