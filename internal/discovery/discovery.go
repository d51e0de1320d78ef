// Package discovery caches an API server's discovery documents, one per
// group version. The server's discovery document of a group version (GET
// /api/v1, GET /apis/<group>/<version>, a metav1.APIResourceList) says
// what it serves there: each resource's plural, kind, scope and
// subresources. kctl reads it to check a declared Resource before its
// first request, so that a wrong declaration fails with an error naming
// the difference and the fix, not with a misleading 404; and Failed makes
// a failed answer an error: the server's Status with the call, the RBAC
// permission a Forbidden call lacks, a resource the server does not serve.
package discovery

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Refresh is the least time between two requests for one group
// version's discovery document on one Conn.
const Refresh = time.Second

// Cache caches one connection's discovery documents, one per group version.
//
// Bounds: one request per group version at a time, the others wait for
// it. A document is asked for again only when a check misses in it (its
// group version, resource or subresource is not there), when the last request
// for it failed, or when the server answered "not installed" to a request for
// a resource it lists, and then at most once per Refresh (1 s): a
// missing CRD costs at most one discovery request per second per group
// version however often it is used, and a CRD applied later is seen by the
// first check a second or more after the last request. A document that has
// what a check wants is kept for the Conn's life.
//
// The zero value is ready to use. Safe for concurrent use.
type Cache struct {
	mu   sync.Mutex
	docs map[string]*served // by group version, e.g. "apps/v1" or "v1"
	// Now is the clock; nil means time.Now (tests set a fake one).
	Now func() time.Time
}

// served is what one group version serves. Only a holder of lock reads or
// changes the fields after it: fetched is zero until a request for the
// document ended; then either err is that request's failure, or resources
// is the document (nil if the server does not serve the group version).
type served struct {
	lock      chan struct{}                 // one slot: held to read, and during a request
	fetched   time.Time                     // when the last request was made
	resources map[string]metav1.APIResource // by name: "widgets", "widgets/status"
	err       error                         // the last request failed
	stale     bool                          // a request contradicted the document
}

// Fetch reads the discovery document at path ("/api/v1",
// "/apis/apps/v1"): nil if the server does not serve it.
type Fetch func(ctx context.Context, path string) (map[string]metav1.APIResource, error)

// Lookup returns what group version gv serves (nil if it serves nothing
// there), asking the server with get first if the cached document is
// missing, failed, stale or lacks name, within the bounds above.
func (d *Cache) Lookup(ctx context.Context, get Fetch, gv, name string) (map[string]metav1.APIResource, error) {
	s := d.entry(gv)
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("kctl: waiting for the discovery document of %s: %w", gv, ctx.Err())
	}
	defer func() { <-s.lock }()
	now := d.clock()
	if !s.due(now, name) {
		return s.resources, s.err
	}
	if err := s.fetch(ctx, get, gv, now); err != nil {
		return nil, err
	}
	return s.resources, s.err
}

// Outdated marks gv's document stale: a request found a resource it lists missing.
func (d *Cache) Outdated(ctx context.Context, gv string) {
	s := d.entry(gv)
	select {
	case s.lock <- struct{}{}:
		s.stale = true
		<-s.lock
	case <-ctx.Done():
	}
}

func (d *Cache) entry(gv string) *served {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.docs == nil {
		d.docs = map[string]*served{}
	}
	s, ok := d.docs[gv]
	if !ok {
		s = &served{lock: make(chan struct{}, 1)}
		d.docs[gv] = s
	}
	return s
}

func (d *Cache) clock() time.Time {
	if d.Now == nil {
		return time.Now()
	}
	return d.Now()
}

// due reports whether s must be asked for again by a check of name at now.
func (s *served) due(now time.Time, name string) bool {
	if s.fetched.IsZero() {
		return true
	}
	if now.Sub(s.fetched) < Refresh {
		return false
	}
	_, ok := s.resources[name]
	return !ok || s.stale || s.err != nil
}

// fetch asks the server for gv's document and records the answer. A request
// that fails because ctx ended records nothing and returns its error: a later
// check with a live context asks again.
func (s *served) fetch(ctx context.Context, get Fetch, gv string, now time.Time) error {
	path := "/apis/" + gv
	if !strings.Contains(gv, "/") {
		path = "/api/" + gv
	}
	resources, err := get(ctx, path)
	if err != nil && ctx.Err() != nil {
		return err
	}
	s.fetched = now
	s.resources = resources
	s.err = err
	s.stale = false
	return nil
}

// ListServed lists the resources of a discovery document, e.g. "gadgets (kind Gadget), widgets (kind Widget)".
func ListServed(resources map[string]metav1.APIResource) string {
	var names []string
	for name, r := range resources {
		if !strings.Contains(name, "/") {
			names = append(names, name+" (kind "+r.Kind+")")
		}
	}
	if len(names) == 0 {
		return "nothing"
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
