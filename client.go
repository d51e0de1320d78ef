package kctl

import (
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
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/homedir"
)

// LoadConfig finds the cluster configuration, trying in order: the
// kubeconfig path given (a --kubeconfig flag; "" skips it), $KUBECONFIG (a
// list of files, merged), the in-cluster service account, ~/.kube/config.
// The first source present wins; if it is broken, that is the error. When no
// source is present, the error lists what was tried.
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

// Default client-side limits. They are high on purpose: kctl should not be
// the bottleneck of a controller, and the API server protects itself with
// API Priority and Fairness (answering 429, which kctl retries).
const (
	DefaultQPS   = 200
	DefaultBurst = 500
	maxRetries   = 10               // of one request answered 429 (or 5xx with Retry-After, for reads)
	maxRetryWait = 30 * time.Second // cap on one Retry-After
)

// Conn is one connection to an API server, shared by every Client made from
// it: the HTTP client (TLS, authentication and exec plugins from client-go's
// rest package), the user agent "kctl/<version> (<os>/<arch>)" unless the
// config sets one, and a client-side rate limit of cfg.QPS/cfg.Burst
// (DefaultQPS/DefaultBurst when 0; a negative QPS disables it). Requests
// answered 429 Too Many Requests are retried after the server's Retry-After,
// at most 10 times, while their context allows.
//
// Make one with NewConn; the zero value is unusable. A Conn is safe for
// concurrent use and holds no goroutines.
type Conn struct {
	base    url.URL      // scheme://host[/path prefix]
	http    *http.Client // requests, with cfg.Timeout
	watches *http.Client // the same transport without a total timeout
	limiter *rate.Limiter
}

// NewConn makes a Conn from cfg (which it does not modify).
func NewConn(cfg *rest.Config) (*Conn, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = userAgent()
	}
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
	qps, burst := float64(cfg.QPS), cfg.Burst
	if qps == 0 {
		qps = DefaultQPS
	}
	if burst <= 0 {
		burst = DefaultBurst
	}
	if qps > 0 {
		c.limiter = rate.NewLimiter(rate.Limit(qps), burst)
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
	Fields    string          // a field selector, e.g. "spec.nodeName=node-1"
}

// ErrNotInstalled matches (with errors.Is) the error of a call on a resource
// the API server does not serve: a CRD that is not applied, or an API group
// or version that is disabled or too new for the server.
var ErrNotInstalled = errors.New("kctl: resource not installed")

// Client is a typed handle on one resource, e.g. Client[corev1.Pod]: Get,
// List, Create, Update, UpdateStatus, Patch, Apply, Delete, DeleteAllOf.
// Built-in types travel as protobuf, declared ones as JSON. Every object
// returned has apiVersion and kind set. Writes update the object passed in
// from the server's answer. Errors wrap the server's
// *apierrors.StatusError, so apierrors.IsNotFound, IsConflict, IsForbidden
// and friends work, and errors.Is(err, ErrNotInstalled) spots a missing CRD.
//
//	pods := kctl.NewClient[corev1.Pod](conn)
//	pod, err := pods.Get(ctx, "default", "web-0")
//
// A Client made by a Manager reads from the shared cache (Uncached reads
// from the server); one made by NewClient always reads from the server. Make
// one with NewClient; the zero value is unusable. A Client is safe for
// concurrent use.
type Client[T any] struct {
	conn    *Conn
	res     Resource
	codec   codec[T]
	builtin bool  // a k8s.io/api type (strategic merge patch works)
	err     error // T has no Resource; every call returns it
	// cache, when set, serves Get and List (copies); writes always go to the server.
	cache func(ctx context.Context) (*Informer[T], error)
	// afterWrite, when set, is called with every object the server returned from a write.
	afterWrite func(obj metav1.Object)
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
	return &Client[T]{conn: conn, res: res, codec: newCodec[T](res, !declared), builtin: !declared, err: err}
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

// path is the URL path of the collection (name "") or of one object.
func (c *Client[T]) path(verb, namespace, name, sub string, needName bool) (string, error) {
	if c.err != nil {
		return "", c.err
	}
	if needName && name == "" {
		return "", fmt.Errorf("kctl: %s %s: the name is empty", verb, c.res)
	}
	if c.res.Namespaced && namespace == "" && (needName || verb == "create" || verb == "delete all of") {
		return "", fmt.Errorf("kctl: %s %s %s: %s are namespaced; give a namespace", verb, c.res, name, c.res.Plural)
	}
	p := "/apis/" + c.res.Group + "/" + c.res.Version
	if c.res.Group == "" {
		p = "/api/" + c.res.Version
	}
	if c.res.Namespaced && namespace != "" {
		p += "/namespaces/" + url.PathEscape(namespace)
	}
	p += "/" + c.res.Plural
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	if sub != "" {
		p += "/" + sub
	}
	return p, nil
}

// call sends r and returns the body of a 2xx answer, else the server's error.
func (c *Client[T]) call(ctx context.Context, verb, key string, r request) (string, []byte, error) {
	resp, err := c.conn.do(ctx, r)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	ct := resp.Header.Get("Content-Type")
	if err != nil {
		return "", nil, fmt.Errorf("kctl: %s %s %s: reading the answer: %w", verb, c.res, key, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", nil, c.statusError(verb, key, resp, ct, body)
	}
	return ct, body, nil
}

// inNamespace describes a collection in error messages.
func inNamespace(namespace string) string {
	if namespace == "" {
		return ""
	}
	return "in namespace " + namespace
}

func nsKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Get returns the object namespace/name (namespace "" for cluster-scoped
// resources). With a cache it returns a copy from the cache, and a
// NotFound error when the cache has no such object.
func (c *Client[T]) Get(ctx context.Context, namespace, name string) (*T, error) {
	if c.cache != nil && c.err == nil {
		inf, err := c.synced(ctx)
		if err != nil {
			return nil, err
		}
		obj, ok := inf.Get(namespace, name)
		if !ok {
			nf := apierrors.NewNotFound(schema.GroupResource{Group: c.res.Group, Resource: c.res.Plural}, name)
			return nil, fmt.Errorf("kctl: get %s %s (from the cache): %w", c.res, nsKey(namespace, name), nf)
		}
		return deepCopy(obj), nil
	}
	p, err := c.path("get", namespace, name, "", true)
	if err != nil {
		return nil, err
	}
	ct, body, err := c.call(ctx, "get", nsKey(namespace, name), request{method: http.MethodGet, path: p, accept: c.codec.accept(false)})
	if err != nil {
		return nil, err
	}
	return c.codec.decode(ct, body)
}

func (c *Client[T]) synced(ctx context.Context) (*Informer[T], error) {
	inf, err := c.cache(ctx)
	if err == nil {
		err = inf.WaitForSync(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("kctl: reading %s from the cache: %w", c.res, err)
	}
	return inf, nil
}

// listPageSize is the page size of List; ListMaxRestarts bounds how often a
// List whose continue token expired starts over.
const (
	listPageSize    = 500
	listMaxRestarts = 2
)

// List returns the objects matching opts (copies, when read from the cache).
// From the server it reads pages of 500 and, if the server expires the
// continue token between pages (410 Gone), starts over, at most twice.
func (c *Client[T]) List(ctx context.Context, opts ListOptions) ([]*T, error) {
	if c.cache != nil && c.err == nil {
		inf, err := c.synced(ctx)
		if err != nil {
			return nil, err
		}
		items := inf.List(opts)
		out := make([]*T, len(items))
		for i, obj := range items {
			out[i] = deepCopy(obj)
		}
		return out, nil
	}
	var all []*T
	token, restarts := "", 0
	for {
		items, meta, err := c.listPage(ctx, opts, "", listPageSize, token)
		if err != nil && token != "" && apierrors.IsResourceExpired(err) && restarts < listMaxRestarts {
			all, token = nil, ""
			restarts++
			continue
		}
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if meta.Continue == "" {
			return all, nil
		}
		token = meta.Continue
	}
}

func selectors(opts ListOptions) url.Values {
	q := url.Values{}
	if opts.Labels != nil && !opts.Labels.Empty() {
		q.Set("labelSelector", opts.Labels.String())
	}
	if opts.Fields != "" {
		q.Set("fieldSelector", opts.Fields)
	}
	return q
}

// listPage is one List request; cache.go pages through it. resourceVersion
// is sent only with the first page (continueToken ""); limit 0 means no limit.
func (c *Client[T]) listPage(ctx context.Context, opts ListOptions, resourceVersion string, limit int64, continueToken string) ([]*T, metav1.ListMeta, error) {
	p, err := c.path("list", opts.Namespace, "", "", false)
	if err != nil {
		return nil, metav1.ListMeta{}, err
	}
	q := selectors(opts)
	if limit > 0 {
		q.Set("limit", strconv.FormatInt(limit, 10))
	}
	if continueToken != "" {
		q.Set("continue", continueToken)
	} else if resourceVersion != "" {
		q.Set("resourceVersion", resourceVersion)
	}
	ct, body, err := c.call(ctx, "list", inNamespace(opts.Namespace), request{method: http.MethodGet, path: p, query: q, accept: c.codec.accept(false)})
	if err != nil {
		return nil, metav1.ListMeta{}, err
	}
	return c.codec.decodeList(ct, body)
}

// watch opens a watch from resourceVersion with bookmarks; the server ends
// it after timeout (rounded to seconds; 0 leaves the server's default).
func (c *Client[T]) watch(ctx context.Context, opts ListOptions, resourceVersion string, timeout time.Duration) (*watchStream[T], error) {
	p, err := c.path("watch", opts.Namespace, "", "", false)
	if err != nil {
		return nil, err
	}
	q := selectors(opts)
	q.Set("watch", "true")
	q.Set("allowWatchBookmarks", "true")
	if resourceVersion != "" {
		q.Set("resourceVersion", resourceVersion)
	}
	if timeout > 0 {
		q.Set("timeoutSeconds", strconv.Itoa(max(1, int(timeout.Seconds()))))
	}
	resp, err := c.conn.do(ctx, request{method: http.MethodGet, path: p, query: q, accept: c.codec.accept(true), watch: true})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, c.statusError("watch", inNamespace(opts.Namespace), resp, resp.Header.Get("Content-Type"), body)
	}
	return newWatchStream(c.codec, resp.Header.Get("Content-Type"), resp.Body), nil
}

// Create creates obj (its namespace, name or generateName, and content) and
// updates obj from the server's answer.
func (c *Client[T]) Create(ctx context.Context, obj *T) error {
	return c.write(ctx, "create", http.MethodPost, obj, "")
}

// Update replaces obj on the server, failing with Conflict (apierrors.IsConflict)
// when obj's resourceVersion is stale, and updates obj from the answer. Changes
// to the status are ignored by the server when the resource has a status
// subresource: use UpdateStatus for those.
func (c *Client[T]) Update(ctx context.Context, obj *T) error {
	return c.write(ctx, "update", http.MethodPut, obj, "")
}

// UpdateStatus is Update of the status subresource: only obj's status is
// written, with the same optimistic concurrency.
func (c *Client[T]) UpdateStatus(ctx context.Context, obj *T) error {
	return c.write(ctx, "update status of", http.MethodPut, obj, "status")
}

func (c *Client[T]) write(ctx context.Context, verb, method string, obj *T, sub string) error {
	m := metaOf(obj)
	name := m.GetName()
	if verb == "create" {
		name = ""
	}
	p, err := c.path(verb, m.GetNamespace(), name, sub, verb != "create")
	if err != nil {
		return err
	}
	body, ct, err := c.codec.encode(obj)
	if err != nil {
		return err
	}
	r := request{method: method, path: p, body: body, contentType: ct, accept: c.codec.accept(false)}
	return c.answer(ctx, verb, keyOf(m), r, obj)
}

// answer sends a write and stores the server's object in obj.
func (c *Client[T]) answer(ctx context.Context, verb, key string, r request, obj *T) error {
	rct, rbody, err := c.call(ctx, verb, key, r)
	if err != nil {
		return err
	}
	out, err := c.codec.decode(rct, rbody)
	if err != nil {
		return err
	}
	*obj = *out
	if c.afterWrite != nil {
		c.afterWrite(metaOf(obj))
	}
	return nil
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

// Patch applies data, a patch of type typ, to the object namespace/name and
// returns the patched object.
//
//	cm, err := configMaps.Patch(ctx, "default", "settings", kctl.MergePatch, []byte(`{"data":{"mode":"fast"}}`), kctl.PatchOptions{})
func (c *Client[T]) Patch(ctx context.Context, namespace, name string, typ PatchType, data []byte, opts PatchOptions) (*T, error) {
	verb := "patch"
	if typ == ApplyPatch {
		verb = "apply"
	}
	p, err := c.path(verb, namespace, name, opts.Subresource, true)
	if err != nil {
		return nil, err
	}
	if typ == StrategicMergePatch && !c.builtin {
		return nil, fmt.Errorf("kctl: patch %s %s: strategic merge patch works only for k8s.io/api types; use a merge patch, a JSON patch or Apply", c.res, nsKey(namespace, name))
	}
	if typ == ApplyPatch && opts.FieldManager == "" {
		return nil, fmt.Errorf("kctl: apply %s %s: server-side apply needs PatchOptions.FieldManager, e.g. the controller's name", c.res, nsKey(namespace, name))
	}
	q := url.Values{}
	if opts.FieldManager != "" {
		q.Set("fieldManager", opts.FieldManager)
	}
	if opts.Force && typ == ApplyPatch {
		q.Set("force", "true")
	}
	obj := new(T)
	r := request{method: http.MethodPatch, path: p, query: q, body: data, contentType: string(typ), accept: c.codec.accept(false)}
	if err := c.answer(ctx, verb, nsKey(namespace, name), r, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// Apply is server-side apply of obj as the field manager opts.FieldManager,
// sent as JSON; obj is updated from the answer. obj should hold only the
// fields this manager owns: a typed struct also sends its non-omitempty
// zero values (e.g. "creationTimestamp": null), which the server ignores.
func (c *Client[T]) Apply(ctx context.Context, obj *T, opts PatchOptions) error {
	c.codec.setTypeMeta(obj)
	data, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("kctl: apply %s %s: encoding as JSON: %w", c.res, keyOf(metaOf(obj)), err)
	}
	m := metaOf(obj)
	out, err := c.Patch(ctx, m.GetNamespace(), m.GetName(), ApplyPatch, data, opts)
	if err != nil {
		return err
	}
	*obj = *out
	return nil
}

// DeleteOptions tunes DeleteWithOptions and DeleteAllOf. The zero value is
// an unconditional delete with the server's default propagation.
type DeleteOptions struct {
	// UID and ResourceVersion, when set, are preconditions: the delete fails
	// with Conflict if the object is no longer that one, or has changed.
	UID             types.UID
	ResourceVersion string
	// Propagation is what happens to dependents: metav1.DeletePropagationBackground
	// (the usual default), Foreground or Orphan; "" leaves the server's default.
	Propagation metav1.DeletionPropagation
	// GracePeriodSeconds, when set, overrides the object's grace period (0: now).
	GracePeriodSeconds *int64
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
// a propagation policy. An object with finalizers is only marked for
// deletion. afterWrite sees the object the server returns, if any.
func (c *Client[T]) DeleteWithOptions(ctx context.Context, namespace, name string, opts DeleteOptions) error {
	p, err := c.path("delete", namespace, name, "", true)
	if err != nil {
		return err
	}
	r := request{method: http.MethodDelete, path: p, body: opts.body(), contentType: mediaJSON, accept: c.codec.accept(false)}
	ct, body, err := c.call(ctx, "delete", nsKey(namespace, name), r)
	if err != nil {
		return err
	}
	if _, isStatus := decodeStatus(ct, body); !isStatus && c.afterWrite != nil {
		if obj, err := c.codec.decode(ct, body); err == nil {
			c.afterWrite(metaOf(obj))
		}
	}
	return nil
}

// DeleteAllOf deletes every object matching opts in one request
// (deletecollection). For a namespaced resource opts.Namespace is required.
func (c *Client[T]) DeleteAllOf(ctx context.Context, opts ListOptions, del DeleteOptions) error {
	p, err := c.path("delete all of", opts.Namespace, "", "", false)
	if err != nil {
		return err
	}
	r := request{method: http.MethodDelete, path: p, query: selectors(opts), body: del.body(), contentType: mediaJSON, accept: c.codec.accept(false)}
	_, _, err = c.call(ctx, "delete all of", inNamespace(opts.Namespace), r)
	return err
}
