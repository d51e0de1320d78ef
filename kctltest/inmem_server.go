package kctltest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// memServer is the in-memory API server: an http.Handler serving the
// objects of a Fake on the API server's paths and wire formats. See
// StartInMemory for what it models.
type memServer struct {
	fake *Fake
	// crds caches customResourcesLocked; nil after a CRD changed. Guarded
	// by fake.mu.
	crds map[string]map[string]*memResource
	// snaps are the snapshots the later pages of lists read, by number;
	// lastSnap is the last number given. Guarded by fake.mu.
	snaps    map[int64]*listSnapshot
	lastSnap int64

	memo encodeMemo // the protobuf encodings of stored objects

	keysOnce sync.Once
	keys     map[string]*memResource // see byStoreKey

	mu      sync.Mutex
	inject  map[string]func(namespace, name string) error // by "verb resource"
	watches map[chan struct{}]struct{}                    // each open watch's: closed to drop it
}

func newMemServer() *memServer {
	fake := NewFake()
	fake.log = newChangeLog()
	s := &memServer{fake: fake, watches: map[chan struct{}]struct{}{}}
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		doc := map[string]any{"metadata": map[string]any{"name": ns}}
		f := s.fakeOf(builtins()["v1"]["namespaces"])
		fake.mu.Lock()
		f.createLocked(doc, "")
		fake.mu.Unlock()
	}
	fake.log.oldest = fake.rv // history begins now: a watch from before is 410 Gone, as with a new watch cache
	return s
}

// call is one request, parsed from its path.
type call struct {
	verb      string // get, list, watch, create, update, patch, apply, delete, deletecollection
	res       *memResource
	namespace string
	name      string
	sub       string
}

func (s *memServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has("dryRun") {
		s.fail(w, notModelled("dry runs (dryRun)"))
		return
	}
	gv, rest, ok := splitPath(r.URL.Path)
	if !ok {
		s.discovery(w, r)
		return
	}
	s.fake.mu.Lock()
	c, err := s.parseLocked(r, gv, rest)
	s.fake.mu.Unlock()
	if err != nil {
		s.fail(w, err)
		return
	}
	if err := s.injected(c); err != nil {
		s.fail(w, err)
		return
	}
	switch {
	case c.sub == "scale":
		s.scale(w, r, c)
		return
	case c.sub == "eviction":
		s.evict(w, r, c)
		return
	}
	switch c.verb {
	case "get":
		s.get(w, r, c)
	case "list":
		s.list(w, r, c)
	case "watch":
		s.watch(w, r, c)
	default:
		s.write(w, r, c)
	}
}

// splitPath splits /api/v1/... and /apis/group/version/... into the group
// version and the rest; ok is false for a discovery path.
func splitPath(p string) (gv string, rest []string, ok bool) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		return parts[1], parts[2:], true
	case len(parts) >= 4 && parts[0] == "apis":
		return parts[1] + "/" + parts[2], parts[3:], true
	}
	return "", nil, false
}

// parseLocked finds the resource, namespace, name, subresource and verb
// of r. The caller holds s.fake.mu.
func (s *memServer) parseLocked(r *http.Request, gv string, rest []string) (call, error) {
	var c call
	if len(rest) >= 3 && rest[0] == "namespaces" {
		if res, ok := s.resourceLocked(gv, rest[2]); ok && res.res.Namespaced {
			c.namespace = rest[1]
			rest = rest[2:]
		}
	}
	if len(rest) > 3 {
		return c, apierrors.NewNotFound(schema.GroupResource{}, "")
	}
	res, ok := s.resourceLocked(gv, rest[0])
	if !ok {
		// a 404 naming no object: kctl's ErrNotInstalled
		return c, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound,
			Reason: metav1.StatusReasonNotFound, Message: fmt.Sprintf("the server could not find the requested resource (%s %s)", gv, rest[0])}}
	}
	c.res = res
	if len(rest) > 1 {
		c.name = rest[1]
	}
	if len(rest) > 2 {
		c.sub = rest[2]
	}
	if !res.res.Namespaced {
		c.namespace = ""
	}
	switch {
	case c.sub != "" && c.sub != "status" && subresources[resourceName(res)] != c.sub:
		return c, notModelled(fmt.Sprintf("the %s subresource of %s", c.sub, res.res.Plural))
	case c.sub == "status" && !res.status:
		return c, apierrors.NewNotFound(schema.GroupResource{Group: res.res.Group, Resource: res.res.Plural + "/status"}, c.name)
	}
	q := r.URL.Query()
	watch := q.Get("watch") == "true" || q.Get("watch") == "1"
	switch {
	case r.Method == http.MethodGet && c.name != "":
		c.verb = "get"
	case r.Method == http.MethodGet && watch:
		c.verb = "watch"
	case r.Method == http.MethodGet:
		c.verb = "list"
	case r.Method == http.MethodPost && c.name == "",
		r.Method == http.MethodPost && c.sub == "eviction":
		c.verb = "create"
	case r.Method == http.MethodPut && c.name != "":
		c.verb = "update"
	case r.Method == http.MethodPatch && c.name != "" && r.Header.Get("Content-Type") == "application/apply-patch+yaml":
		c.verb = "apply"
	case r.Method == http.MethodPatch && c.name != "":
		c.verb = "patch"
	case r.Method == http.MethodDelete && c.name != "":
		c.verb = "delete"
	case r.Method == http.MethodDelete:
		c.verb = "deletecollection"
	default:
		return c, apierrors.NewMethodNotSupported(schema.GroupResource{Group: res.res.Group, Resource: res.res.Plural}, r.Method)
	}
	if what, ok := unenforced[resourceName(res)]; ok && (c.verb == "create" || c.verb == "apply") {
		return c, notModelled(what + " (" + resourceName(res) + ")")
	}
	return c, nil
}

// unenforced are the resources whose objects the in-memory server would
// store without doing what they ask: making one is an error instead.
var unenforced = map[string]string{
	"mutatingwebhookconfigurations.admissionregistration.k8s.io":     "admission webhooks",
	"validatingwebhookconfigurations.admissionregistration.k8s.io":   "admission webhooks",
	"validatingadmissionpolicies.admissionregistration.k8s.io":       "admission policies",
	"validatingadmissionpolicybindings.admissionregistration.k8s.io": "admission policies",
	"mutatingadmissionpolicies.admissionregistration.k8s.io":         "admission policies",
	"mutatingadmissionpolicybindings.admissionregistration.k8s.io":   "admission policies",
	"resourcequotas":                     "quotas",
	"limitranges":                        "limit ranges",
	"apiservices.apiregistration.k8s.io": "aggregated API servers",
}

// discovery serves /api, /apis, and the discovery documents of group versions.
func (s *memServer) discovery(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	s.fake.mu.Lock()
	var doc any
	switch {
	case r.URL.Path == "/version":
		doc = map[string]string{"major": "1", "minor": "36", "gitVersion": "v1.36.0-kctltest-inmemory", "platform": "inmemory"}
	case len(parts) == 1 && parts[0] == "api":
		doc = &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}}
	case len(parts) == 1 && parts[0] == "apis":
		doc = s.groupsLocked()
	case len(parts) == 2 && parts[0] == "api":
		if d := s.discoveryDocLocked(parts[1]); d != nil {
			doc = d
		}
	case len(parts) == 3 && parts[0] == "apis":
		if d := s.discoveryDocLocked(parts[1] + "/" + parts[2]); d != nil {
			doc = d
		}
	}
	s.fake.mu.Unlock()
	if doc == nil {
		http.NotFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

// injected is the error InjectError set up for c, if any.
func (s *memServer) injected(c call) error {
	verb := c.verb
	if verb == "deletecollection" {
		verb = "delete"
	}
	s.mu.Lock()
	fail := s.inject[verb+" "+resourceName(c.res)]
	if fail == nil {
		fail = s.inject[verb+" *"]
	}
	s.mu.Unlock()
	if fail == nil {
		return nil
	}
	return fail(c.namespace, c.name)
}

// resourceName is "plural" for the core group, else "plural.group".
func resourceName(r *memResource) string {
	return strings.TrimSuffix(r.res.Plural+"."+r.res.Group, ".")
}

// notModelled is the error of what the in-memory server does not model.
func notModelled(what string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotImplemented,
		Reason: "NotImplemented", Message: "kctltest: the in-memory server (StartInMemory) does not model " + what +
			": test it against a real API server with Start"}}
}

// fail answers err as the API server does: a metav1.Status.
func (s *memServer) fail(w http.ResponseWriter, err error) {
	var st apierrors.APIStatus
	status := metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: err.Error()}
	if strings.Contains(err.Error(), "test it with Start") {
		status.Code = http.StatusNotImplemented // what the fake's store does not model
		status.Reason = "NotImplemented"
	}
	if errors.As(err, &st) {
		status = st.Status()
	}
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	if status.Code == 0 {
		status.Code = http.StatusInternalServerError
	}
	if d := status.Details; d != nil && d.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(d.RetryAfterSeconds)))
	}
	writeJSON(w, int(status.Code), status)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		b = []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}

// readDoc reads a write's body: JSON, YAML (an apply), or protobuf of a
// k8s.io/api type.
func readDoc(r *http.Request, res *memResource) (map[string]any, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	b, err = decodeBody(r.Header.Get("Content-Type"), b, res)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil || doc == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is not a JSON object: %v", err))
	}
	return doc, nil
}
