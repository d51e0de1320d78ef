package kctl

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/homedir"
)

// LoadConfig finds the cluster configuration, trying in order: the path given
// (a --kubeconfig flag; "" skips it), $KUBECONFIG (files, merged), the
// in-cluster service account, ~/.kube/config. The first source present wins,
// even if broken; when none is, the error lists what was tried.
//
//	cfg, err := kctl.LoadConfig(*kubeconfig)
func LoadConfig(kubeconfig string) (*rest.Config, error) {
	load := func(what string, rules *clientcmd.ClientConfigLoadingRules) (*rest.Config, error) {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kctl: loading %s: %w", what, err)
		}
		return cfg, nil
	}
	if kubeconfig != "" {
		return load("the kubeconfig "+kubeconfig, &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig})
	}
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		return load("$KUBECONFIG ("+env+")", &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(env)})
	}
	if cfg, err := rest.InClusterConfig(); !errors.Is(err, rest.ErrNotInCluster) {
		if err != nil {
			return nil, fmt.Errorf("kctl: loading the in-cluster configuration: %w", err)
		}
		return cfg, nil
	}
	home := filepath.Join(homedir.HomeDir(), clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
	if _, err := os.Stat(home); err == nil {
		return load(home, &clientcmd.ClientConfigLoadingRules{ExplicitPath: home})
	}
	return nil, fmt.Errorf("kctl: no cluster configuration found; tried the --kubeconfig flag (not given), "+
		"$KUBECONFIG (not set), the in-cluster service account (KUBERNETES_SERVICE_HOST/PORT not set) and %s "+
		"(does not exist): pass --kubeconfig or set $KUBECONFIG", home)
}

// The default client-side limits are high on purpose: the API server
// protects itself with API Priority and Fairness, answering 429s.
const defaultQPS, defaultBurst = 200, 500

// Conn is one connection to an API server, shared by the Clients made from
// it: client-go's HTTP client (TLS, authentication, exec plugins), the user
// agent "kctl/<version> (<os>/<arch>)" unless cfg sets one, and a rate limit
// of cfg.QPS and cfg.Burst (200 and 500 when 0; a negative QPS disables it).
// A 429 Too Many Requests is retried after its Retry-After, at most 10 times.
// A Manager's own Conn counts its requests on the Manager's metrics page
// (rest_client_requests_total, rest_client_request_duration_seconds); one
// you make counts nothing. Make one with NewConn; the zero value is
// unusable. A Conn is safe for concurrent use and holds no goroutines.
type Conn struct {
	base          url.URL                 // scheme://host[/path prefix]
	http, watches *http.Client            // watches: the same transport without cfg.Timeout
	limiter       flowcontrol.RateLimiter // nil: no client-side limit
	discovery     discovery               // what the server serves, for declared types' checks
	requests      *requestMetrics         // a Manager's rest_client_* series; nil: not counted
}

// NewConn makes a Conn from cfg (which it does not modify).
func NewConn(cfg *rest.Config) (*Conn, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = cmp.Or(cfg.UserAgent, userAgent())
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kctl: making an HTTP client for %s: %w", cfg.Host, err)
	}
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kctl: bad API server address %q: %w", cfg.Host, err)
	}
	w := *hc
	w.Timeout = 0
	c := &Conn{base: *base, http: hc, watches: &w}
	if qps := cmp.Or(cfg.QPS, defaultQPS); qps > 0 {
		c.limiter = flowcontrol.NewTokenBucketRateLimiter(qps, cmp.Or(max(cfg.Burst, 0), defaultBurst))
	}
	return c, nil
}

func userAgent() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range append(bi.Deps, &bi.Main) {
			if m.Path == "github.com/kctl-dev/kctl" && m.Version != "" && m.Version != "(devel)" {
				v = m.Version
			}
		}
	}
	return "kctl/" + v + " (" + runtime.GOOS + "/" + runtime.GOARCH + ")"
}

// ListOptions selects objects for List, DeleteAllOf and the cache. The zero
// value selects every object in every namespace.
type ListOptions struct {
	Namespace string          // "" means every namespace
	Labels    labels.Selector // nil matches everything
	// Fields is a field selector, e.g. "spec.nodeName=node-1". A cached List
	// evaluates metadata.name, metadata.namespace and indexed fields, and
	// fails naming any other (see Informer.List).
	Fields string
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.Labels != nil && !o.Labels.Empty() {
		q.Set("labelSelector", o.Labels.String())
	}
	if o.Fields != "" {
		q.Set("fieldSelector", o.Fields)
	}
	return q
}

// Client is a typed handle on one resource:
//
//	pods := kctl.NewClient[corev1.Pod](conn)
//	pod, err := pods.Get(ctx, "default", "web-0")
//
// Built-in types travel as protobuf, declared ones as JSON. Returned objects
// have apiVersion and kind set. Every write that takes an object (Create,
// Update, UpdateStatus, Patch, Apply) updates it from the server's answer on
// success and leaves it as it was on error. Errors wrap the server's
// *apierrors.StatusError (so apierrors.IsNotFound, IsConflict... work) or
// match ErrNotInstalled; a declaration the server contradicts (see Declare)
// is an error naming the fix. One made
// by a Manager reads from the shared cache (see Uncached), one made by
// NewClient from the server. The zero value is unusable. A Client is safe for
// concurrent use.
type Client[T any] struct {
	conn       *Conn
	res        Resource
	codec      codec[T]
	err        error                                           // T has no Resource: every call returns it
	cache      func(ctx context.Context) (*Informer[T], error) // when set, serves Get and List (copies)
	afterWrite func(obj metav1.Object)                         // when set, sees each object a write returns
	writes     *writeTracker                                   // ClientFor's: cached reads wait for the Manager's writes
	lastBody   *atomic.Int64                                   // the size of the last answer without a Content-Length (compressed)
}

// NewClient returns an uncached client for T. If T has no Resource (see
// ResourceOf), every call returns that error.
func NewClient[T any, PT Object[T]](conn *Conn) *Client[T] {
	t := reflect.TypeFor[T]()
	res, err := resourceFor(t)
	registry.mu.RLock()
	_, declared := registry.declared[t]
	registry.mu.RUnlock()
	if err == nil && conn == nil {
		err = fmt.Errorf("kctl: NewClient[%s] got a nil Conn: make one with kctl.NewConn", typeName(t))
	}
	if err == nil {
		err = jsonCopyable[T]()
	}
	return &Client[T]{conn: conn, res: res, codec: newCodec[T](res, !declared), err: err, lastBody: new(atomic.Int64)}
}

// Uncached returns a handle on the same resource whose Get and List always
// read from the API server: use it when an answer must be fresh.
func (c *Client[T]) Uncached() *Client[T] {
	u := *c
	u.cache = nil
	return &u
}

// Resource is the resource this client talks to.
func (c *Client[T]) Resource() Resource { return c.res }

// what names r's object or collection in errors, e.g. "pods/v1 shop/web-0".
func (c *Client[T]) what(r request) string {
	switch {
	case !r.list:
		return c.res.String() + " " + nsKey(r.namespace, r.name)
	case r.namespace != "":
		return c.res.String() + " in namespace " + r.namespace
	}
	return c.res.String()
}

// send checks and sends r. It returns a 2xx response, whose body the caller
// closes, or an error: any other answer is the server's.
func (c *Client[T]) send(ctx context.Context, r request) (*http.Response, error) {
	switch {
	case c.err != nil:
		return nil, c.err
	case r.name == "" && !r.list && r.method != http.MethodPost:
		return nil, fmt.Errorf("kctl: %s %s: the name is empty", r.verb, c.res)
	case c.res.Namespaced && r.namespace == "" && (!r.list || r.method != http.MethodGet):
		return nil, fmt.Errorf("kctl: %s %s: %s are namespaced; give a namespace", r.verb, c.what(r), c.res.Plural)
	}
	if !c.codec.builtin { // k8s.io/api types: see TestResourceOf_EveryListedK8sAPIType_MatchesServerDiscovery
		if err := c.checkServed(ctx, r); err != nil {
			return nil, err
		}
	}
	r.path = "/api/" + c.res.Version
	if c.res.Group != "" {
		r.path = "/apis/" + c.res.Group + "/" + c.res.Version
	}
	if c.res.Namespaced && r.namespace != "" {
		r.path += "/namespaces/" + url.PathEscape(r.namespace)
	}
	if r.path += "/" + c.res.Plural; !r.list && r.method != http.MethodPost {
		r.path += "/" + url.PathEscape(r.name)
	}
	if r.sub != "" {
		r.path += "/" + r.sub
	}
	r.accept = c.codec.accept(r.query.Has("watch"))
	resp, err := c.conn.do(ctx, r)
	if err != nil || resp.StatusCode/100 == 2 {
		return resp, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	err = c.statusError(r, resp, body)
	if !errors.Is(err, ErrNotInstalled) {
		return nil, err
	}
	c.conn.discovery.outdated(ctx, c.res.APIVersion()) // the next check asks the server again
	if r.sub == "" {
		return nil, err
	}
	// The server has no route for a subresource it does not serve (e.g. a ConfigMap's status): say so.
	if notServed := c.checkServed(ctx, r); errors.Is(notServed, ErrNotInstalled) {
		return nil, notServed
	}
	return nil, err
}

// call sends r and hands the Content-Type and body of the answer to read.
// The body is a pooled buffer: it is valid only until read returns.
func (c *Client[T]) call(ctx context.Context, r request, read func(ct string, body []byte) error) error {
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	buf := bodies.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooledBody {
			bodies.Put(buf)
		}
	}()
	n, unknown := resp.ContentLength, resp.ContentLength < 0
	if unknown { // compressed (a list page): expect what the last such answer took, not a chain of doublings
		n = c.lastBody.Load()
	}
	if n > 0 && n < maxPooledBody {
		buf.Grow(int(n) + bytes.MinRead) // ReadFrom needs MinRead spare bytes to see the end
	}
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return fmt.Errorf("kctl: %s %s: reading the answer: %w", r.verb, c.what(r), err)
	}
	if unknown {
		c.lastBody.Store(int64(buf.Len()))
	}
	return read(resp.Header.Get("Content-Type"), buf.Bytes())
}

// object sends r and decodes the object answered; afterWrite sees a write's.
func (c *Client[T]) object(ctx context.Context, r request) (obj *T, err error) {
	err = c.call(ctx, r, func(ct string, body []byte) error {
		if obj, err = c.codec.decode(ct, body); err == nil && c.afterWrite != nil && r.method != http.MethodGet {
			c.afterWrite(metaOf(obj))
		}
		return err
	})
	return obj, err
}

// synced is the cache's informer for T, once synced. A resource the server
// does not serve fails at once, after at most one discovery request (whose
// answer is cached, see discovery), rather than when ctx ends.
func (c *Client[T]) synced(ctx context.Context) (*Informer[T], error) {
	inf, err := c.cache(ctx)
	if err == nil {
		err = c.checkServed(ctx, request{})
	}
	if err == nil {
		err = inf.WaitForSync(ctx)
	}
	if err != nil {
		return nil, err // each names the resource
	}
	return inf, nil
}

// Get returns the object namespace/name (namespace "" if cluster-scoped): a
// copy from the cache if c has one (NotFound if the cache has no such object).
// A cached Get waits until the cache has synced, at most until ctx ends; of a
// resource the server does not serve (a CRD not applied) it fails at once
// with an error matching ErrNotInstalled, after at most one discovery request.
func (c *Client[T]) Get(ctx context.Context, namespace, name string) (*T, error) {
	if c.cache == nil || c.err != nil {
		return c.object(ctx, request{verb: "get", method: http.MethodGet, namespace: namespace, name: name})
	}
	inf, err := c.synced(ctx)
	if err != nil {
		return nil, err
	}
	if err := readYourWrites(ctx, c.writes, inf, namespace, name); err != nil {
		return nil, err
	}
	if obj, ok := inf.Get(namespace, name); ok {
		return deepCopy(obj), nil
	}
	nf := apierrors.NewNotFound(schema.GroupResource{Group: c.res.Group, Resource: c.res.Plural}, name)
	return nil, fmt.Errorf("kctl: get %s %s (from the cache): %w", c.res, nsKey(namespace, name), nf)
}

// List's page size, and how often a List whose continue token expired starts over.
const listPageSize, listMaxRestarts = 500, 2

// List returns the objects matching opts (copies, from the cache, waiting
// for it as Get does, and failing naming a field selector it cannot evaluate:
// see Informer.List). From the server it reads pages of 500, starting over
// (at most twice) if the continue token expires (410 Gone). Undecodable
// objects are left out: List returns the others and an error naming them.
func (c *Client[T]) List(ctx context.Context, opts ListOptions) ([]*T, error) {
	if c.cache != nil && c.err == nil {
		inf, err := c.synced(ctx)
		if err != nil {
			return nil, err
		}
		if err := readYourWrites(ctx, c.writes, inf, opts.Namespace, ""); err != nil {
			return nil, err
		}
		items, err := inf.List(opts)
		if err != nil {
			return nil, err
		}
		out := make([]*T, len(items))
		for i, obj := range items {
			out[i] = deepCopy(obj)
		}
		return out, nil
	}
	var all []*T
	var skipped []error
	for token, restarts := "", 0; ; {
		items, meta, bad, err := c.listPage(ctx, opts, "", listPageSize, token, nil)
		if err != nil && token != "" && apierrors.IsResourceExpired(err) && restarts < listMaxRestarts {
			all, skipped, token, restarts = nil, nil, "", restarts+1
			continue
		}
		if err != nil {
			return nil, err
		}
		if all, skipped, token = append(all, items...), append(skipped, bad...), meta.Continue; token != "" {
			continue
		}
		if len(skipped) > 0 {
			for i, e := range skipped {
				skipped[i] = unprefixed(e)
			}
			return all, fmt.Errorf("kctl: list %s: left out %d object(s) that could not be decoded: %w",
				c.what(request{list: true, namespace: opts.Namespace}), len(skipped), errors.Join(skipped...))
		}
		return all, nil
	}
}

// listPage is one List request (cache.go pages through it); resourceVersion
// goes only with the first page, and limit 0 means none. Undecodable objects
// are left out of items, skipped naming each; err is for the whole page. If
// early is set, it gets the page's ListMeta (a protobuf page's) as soon as
// the page is read, before its objects are decoded: time to ask for the next.
func (c *Client[T]) listPage(ctx context.Context, opts ListOptions, resourceVersion string, limit int64, continueToken string,
	early func(metav1.ListMeta)) (items []*T, meta metav1.ListMeta, skipped []error, err error) {
	q := opts.query()
	if limit > 0 {
		q.Set("limit", strconv.FormatInt(limit, 10))
	}
	if continueToken != "" {
		q.Set("continue", continueToken)
	} else if resourceVersion != "" {
		q.Set("resourceVersion", resourceVersion)
	}
	r := request{verb: "list", method: http.MethodGet, namespace: opts.Namespace, list: true, query: q}
	err = c.call(ctx, r, func(ct string, body []byte) (err error) {
		if early != nil && isProto(ct) {
			if _, raw, err := unwrap(body); err == nil {
				if m, err := field(raw, 1); err == nil && safeUnmarshal(&meta, m) == nil {
					early(meta)
				}
			}
		}
		items, meta, skipped, err = c.codec.decodeList(ct, body)
		return err
	})
	return items, meta, skipped, err
}

// watch opens a watch from resourceVersion with bookmarks; the server ends
// it after timeout (rounded to seconds; 0 leaves the server's default).
func (c *Client[T]) watch(ctx context.Context, opts ListOptions, resourceVersion string, timeout time.Duration) (*watchStream[T], error) {
	q := opts.query()
	q.Set("watch", "true")
	q.Set("allowWatchBookmarks", "true")
	if resourceVersion != "" {
		q.Set("resourceVersion", resourceVersion)
	}
	if timeout > 0 {
		q.Set("timeoutSeconds", strconv.Itoa(max(1, int(timeout.Seconds()))))
	}
	resp, err := c.send(ctx, request{verb: "watch", method: http.MethodGet, namespace: opts.Namespace, list: true, query: q})
	if err != nil {
		return nil, err
	}
	return newWatchStream(c.codec, resp.Header.Get("Content-Type"), resp.Body), nil
}

// Create creates obj (its namespace, name or generateName, and content) and
// updates obj from the server's answer.
func (c *Client[T]) Create(ctx context.Context, obj *T) error {
	return c.write(ctx, "create", http.MethodPost, obj, "")
}

// Update replaces obj on the server and updates obj from the answer; a stale
// resourceVersion fails with Conflict. The server ignores status changes of a
// resource with a status subresource: use UpdateStatus for those.
func (c *Client[T]) Update(ctx context.Context, obj *T) error {
	return c.write(ctx, "update", http.MethodPut, obj, "")
}

// UpdateStatus is Update of the status subresource: only obj's status is
// written, with the same optimistic concurrency.
func (c *Client[T]) UpdateStatus(ctx context.Context, obj *T) error {
	return c.write(ctx, "update status of", http.MethodPut, obj, "status")
}

func (c *Client[T]) write(ctx context.Context, verb, method string, obj *T, sub string) error {
	if c.err != nil {
		return c.err
	}
	body, ct, err := c.codec.encode(obj)
	if err != nil {
		return err
	}
	m := metaOf(obj)
	out, err := c.object(ctx, request{verb: verb, method: method, namespace: m.GetNamespace(), name: m.GetName(), sub: sub, body: body, contentType: ct})
	if err == nil {
		*obj = *out
	}
	return err
}

// PatchType is the media type of a patch.
type PatchType string

const (
	MergePatch          PatchType = "application/merge-patch+json"           // RFC 7386; lists are replaced whole
	JSONPatch           PatchType = "application/json-patch+json"            // RFC 6902 operations
	StrategicMergePatch PatchType = "application/strategic-merge-patch+json" // k8s.io/api types only
	ApplyPatch          PatchType = "application/apply-patch+yaml"           // server-side apply; needs a FieldManager
)

// PatchOptions tunes Patch and Apply. The zero value patches the object
// itself with no field manager.
type PatchOptions struct {
	FieldManager string // who owns the fields set; required by Apply
	Force        bool   // Apply only: take fields owned by other managers instead of failing with Conflict
	Subresource  string // e.g. "status"; "" patches the object
}

// Patch applies data, a patch of type typ, to the object named by obj's
// namespace and name (the rest of obj is not sent), and updates obj from the
// server's answer, as every write that takes an object does.
//
//	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}}
//	err := configMaps.Patch(ctx, cm, kctl.MergePatch, []byte(`{"data":{"mode":"fast"}}`), kctl.PatchOptions{})
func (c *Client[T]) Patch(ctx context.Context, obj *T, typ PatchType, data []byte, opts PatchOptions) error {
	m := metaOf(obj)
	out, err := c.patch(ctx, m.GetNamespace(), m.GetName(), typ, data, opts)
	if err != nil {
		return err
	}
	*obj = *out
	return nil
}

// patch is Patch of the object namespace/name, returning the answer.
func (c *Client[T]) patch(ctx context.Context, namespace, name string, typ PatchType, data []byte, opts PatchOptions) (*T, error) {
	r := request{verb: "patch", method: http.MethodPatch, namespace: namespace, name: name, sub: opts.Subresource,
		query: url.Values{}, body: data, contentType: string(typ)}
	switch {
	case typ == StrategicMergePatch && !c.codec.builtin:
		return nil, fmt.Errorf("kctl: patch %s: strategic merge patch works only for k8s.io/api types; use a merge patch, a JSON patch or Apply", c.what(r))
	case typ == ApplyPatch && opts.FieldManager == "":
		return nil, fmt.Errorf("kctl: apply %s: server-side apply needs PatchOptions.FieldManager, e.g. the controller's name", c.what(r))
	case typ == ApplyPatch && opts.Force:
		r.query.Set("force", "true")
	}
	if typ == ApplyPatch {
		r.verb = "apply"
	}
	if opts.FieldManager != "" {
		r.query.Set("fieldManager", opts.FieldManager)
	}
	return c.object(ctx, r)
}

// Apply is server-side apply of obj as the field manager opts.FieldManager,
// sent as JSON; obj is updated from the answer. obj should hold only the
// fields this manager owns: a typed struct also sends its non-omitempty zero
// values (e.g. "creationTimestamp": null), which the server ignores.
func (c *Client[T]) Apply(ctx context.Context, obj *T, opts PatchOptions) error {
	js := c.codec
	js.proto = false
	data, _, err := js.encode(obj)
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, ApplyPatch, data, opts)
}

// DeleteOptions tunes DeleteWithOptions and DeleteAllOf. The zero value is an
// unconditional delete with the server's default propagation.
type DeleteOptions struct {
	UID                types.UID                  // a precondition: Conflict if the object is no longer this one
	ResourceVersion    string                     // a precondition: Conflict if the object has changed since
	Propagation        metav1.DeletionPropagation // to dependents: Background, Foreground or Orphan; "": the server's default
	GracePeriodSeconds *int64                     // overrides the object's grace period (0: now)
}

func (o DeleteOptions) body() []byte {
	do := metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "DeleteOptions"},
		GracePeriodSeconds: o.GracePeriodSeconds, PropagationPolicy: nonEmpty(o.Propagation)}
	if o.UID != "" || o.ResourceVersion != "" {
		do.Preconditions = &metav1.Preconditions{UID: nonEmpty(o.UID), ResourceVersion: nonEmpty(o.ResourceVersion)}
	}
	b, _ := json.Marshal(do) // cannot fail: plain strings and numbers
	return b
}

func nonEmpty[S ~string](s S) *S {
	if s == "" {
		return nil
	}
	return &s
}

// Delete deletes the object namespace/name; a missing object is NotFound.
// It is DeleteWithOptions with the zero DeleteOptions.
func (c *Client[T]) Delete(ctx context.Context, namespace, name string) error {
	return c.DeleteWithOptions(ctx, namespace, name, DeleteOptions{})
}

// DeleteWithOptions deletes the object namespace/name with preconditions and
// a propagation policy. An object with finalizers is only marked for deletion.
func (c *Client[T]) DeleteWithOptions(ctx context.Context, namespace, name string, opts DeleteOptions) error {
	r := request{verb: "delete", method: http.MethodDelete, namespace: namespace, name: name, body: opts.body(), contentType: mediaJSON}
	return c.call(ctx, r, func(ct string, body []byte) error {
		st, isStatus := decodeStatus(ct, body)
		switch {
		case isStatus && c.writes != nil && st.Details != nil: // deleted
			c.writes.recordDelete(c.res, namespace, name, st.Details.UID)
		case !isStatus && c.afterWrite != nil: // marked for deletion, or deleted and answered with its last state
			if obj, err := c.codec.decode(ct, body); err == nil {
				c.afterWrite(metaOf(obj))
			}
		}
		return nil
	})
}

// DeleteAllOf deletes every object matching opts in one request
// (deletecollection). For a namespaced resource opts.Namespace is required.
func (c *Client[T]) DeleteAllOf(ctx context.Context, opts ListOptions, del DeleteOptions) error {
	r := request{verb: "delete all of", method: http.MethodDelete, namespace: opts.Namespace, list: true,
		query: opts.query(), body: del.body(), contentType: mediaJSON}
	return c.call(ctx, r, func(string, []byte) error { return nil })
}
