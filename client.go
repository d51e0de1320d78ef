package kctl

// Client[T], one resource's typed requests: the path of a request, its
// answer, and the server's errors made into kctl's (internal/discovery:
// a declared type is first checked against the server's discovery
// document). Its reads are in client_reads.go, its writes in
// client_writes.go; its further verbs (Patch, Apply, ApplyConfig, delete
// options, DeleteAllOf) are on floor 2, client_more.go.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"

	"github.com/kctl-dev/kctl/internal/apitype"
	"github.com/kctl-dev/kctl/internal/discovery"
	"github.com/kctl-dev/kctl/internal/objcopy"
	"github.com/kctl-dev/kctl/internal/transport"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// ListOptions selects objects for List, DeleteAllOf and the cache. The zero
// value selects every object in every namespace.
type ListOptions struct {
	// Namespace "" means every namespace.
	Namespace string
	// Labels nil matches everything.
	Labels labels.Selector
	// Fields is a field selector, e.g. "spec.nodeName=node-1". A cached List
	// evaluates metadata.name, metadata.namespace and indexed fields, and
	// fails naming any other (see Informer.List).
	Fields string
	// ShardSelector selects the objects whose uid or namespace hashes
	// into ranges (internal/shardhash writes it, e.g. "shardRange(
	// object.metadata.uid, '0x0000000000000000', '0x8000000000000000')")
	// on list and watch, where the server serves it (kube-apiserver 1.36,
	// gate ShardedListAndWatch); others send all. Cached Lists ignore it.
	ShardSelector string
}

// query is o as a list or watch request's parameters (internal/apitype).
func (o ListOptions) query() url.Values {
	return apitype.ListQuery(o.Labels, o.Fields, o.ShardSelector)
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
// is an error naming the fix. One made by a Manager reads from the shared
// cache (see Uncached), one made by NewClient from the server. The zero
// value is unusable. A Client is safe for concurrent use.
//
// Its methods call its core, client[*T], written over P = *T: the core
// is compiled once for every T (see typeOps).
type Client[T any] struct {
	client[*T]
}

// client is a Client[T]'s state and work, over P = *T: compiled once for
// every T (see typeOps).
type client[P any] struct {
	conn  *Conn
	res   Resource
	codec codec[P]
	// err is T's error if T has no Resource: every call returns it.
	err error
	// cached, when set, serves Get and List (ClientFor sets the
	// Manager's cache: cachedReads in cache_reads.go); nil reads the server.
	cached cacheReader[P]
	// notes, when set, hears of each write (see writeNotes).
	notes writeNotes
	// _ makes a client not comparable, so that no equality function is
	// compiled for each T: 2 KB a type (bench/typecost).
	_ [0]func()
	// lastBody is the size of the last answer without a
	// Content-Length (a compressed list page).
	lastBody *atomic.Int64
}

// writeNotes hears of a client's writes: record sees each object a write
// answers, recordDelete each object a delete removed. A Manager's
// *writeTracker (readyourwrites.go) fills it in its ClientFor clients
// (manager.go) and its controllers' own clients (manager_controllers.go), so
// that cached reads wait for the writes. object and delete
// (client_writes.go) call it.
type writeNotes interface {
	record(res Resource, obj metav1.Object)
	recordDelete(res Resource, namespace, name string, uid types.UID)
}

// cacheReader serves a cached Client's Get and List, as copies.
type cacheReader[P any] interface {
	get(ctx context.Context, namespace, name string) (P, error)
	list(ctx context.Context, opts ListOptions) ([]P, error)
}

// NewClient returns an uncached client for T. If T has no Resource (see
// ResourceOf), every call returns that error.
func NewClient[T any, PT Object[T]](conn *Conn) *Client[T] {
	ops := opsOf[T]()
	r, declared, err := apitype.Of((*T)(nil))
	if err == nil && conn == nil {
		err = fmt.Errorf("kctl: NewClient[%s] got a nil Conn: "+
			"make one with kctl.NewConn", typeName[T]())
	}
	if err == nil {
		err = objcopy.Copyable(ops.newObject)
	}
	res := Resource(r)
	c := client[*T]{
		conn:     conn,
		res:      res,
		codec:    newCodec(ops, res, !declared),
		err:      err,
		lastBody: new(atomic.Int64),
	}
	return &Client[T]{c}
}

// Resource is the resource this client talks to.
func (c *Client[T]) Resource() Resource { return c.res }

// what names r's object or collection in errors, e.g. "pods/v1 shop/web-0".
func (c *client[P]) what(r request) string {
	switch {
	case !r.list:
		return c.res.String() + " " + nsKey(r.namespace, r.name)
	case r.namespace != "":
		return c.res.String() + " in namespace " + r.namespace
	}
	return c.res.String()
}

// send checks and sends r. It returns a 2xx response, whose body the caller
// closes, or an error: any other answer is the server's, made an error by
// internal/discovery (Failed): its Status, naming the permission a
// Forbidden call lacks, or one matching ErrNotInstalled.
func (c *client[P]) send(ctx context.Context, r request) (*http.Response, error) {
	// a list read may span every namespace
	listRead := r.list && r.method == http.MethodGet
	switch {
	case c.err != nil:
		return nil, c.err
	case r.name == "" && !r.list && r.method != http.MethodPost:
		return nil, fmt.Errorf(
			"kctl: %s %s: the name is empty", r.verb, c.res)
	case c.res.Namespaced && r.namespace == "" && !listRead:
		return nil, fmt.Errorf(
			"kctl: %s %s: %s are namespaced; give a namespace",
			r.verb, c.what(r), c.res.Plural)
	}
	// k8s.io/api types: see
	// TestResourceOf_EveryListedK8sAPIType_MatchesServerDiscovery
	if !c.codec.builtin {
		err := c.checkServed(ctx, r)
		if err != nil {
			return nil, err
		}
	}
	// a create names its object in the body only
	named := ""
	if !r.list && r.method != http.MethodPost {
		named = r.name
	}
	res := apitype.Resource(c.res)
	r.path = res.Path(r.namespace, named, r.sub)
	watch := r.query.Has("watch")
	r.accept = c.codec.accept(watch, listRead)
	resp, err := c.conn.do(ctx, r)
	if err != nil || resp.StatusCode/100 == 2 {
		return resp, err
	}
	defer resp.Body.Close()
	declared, call := c.asked(r)
	get := c.conn.discoveryGet()
	return nil, c.conn.discovery.Failed(ctx, get, declared, call, resp)
}

// checkServed checks c's Resource, and r's subresource if any, against the
// server's discovery document (internal/discovery): nil if the server
// serves them as declared, else an error naming the difference and the
// fix. A resource or subresource the server does not serve matches
// ErrNotInstalled.
func (c *client[P]) checkServed(ctx context.Context, r request) error {
	res, call := c.asked(r)
	get := c.conn.discoveryGet()
	return c.conn.discovery.Check(ctx, get, res, call)
}

// asked is c's Resource and r as internal/discovery checks them and
// makes a failed answer an error.
func (c *client[P]) asked(r request) (discovery.Declared, discovery.Call) {
	res := discovery.Declared{
		Resource: apitype.Resource(c.res),
		Builtin:  c.codec.builtin,
		TypeName: c.codec.ops.name,
	}
	call := discovery.Call{
		Verb:   r.verb,
		What:   c.what(r),
		Sub:    r.sub,
		Method: r.method,
		Name:   r.name,
	}
	return res, call
}

// call sends r and hands the Content-Type and body of the answer to read.
// The body is a pooled buffer: it is valid only until read returns.
func (c *client[P]) call(
	ctx context.Context,
	r request,
	read func(ct string, body []byte) error,
) error {
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	buf, err := transport.ReadBody(resp.Body, resp.ContentLength, c.lastBody)
	if err != nil {
		return fmt.Errorf("kctl: %s %s: reading the answer: %w",
			r.verb, c.what(r), err)
	}
	defer transport.PutBuffer(buf)
	return read(resp.Header.Get("Content-Type"), buf.Bytes())
}

// object sends r and decodes the object answered; notes hears of a write's.
func (c *client[P]) object(ctx context.Context, r request) (obj P, err error) {
	err = c.call(ctx, r, func(ct string, body []byte) error {
		obj, err = c.codec.decode(ct, body)
		if err == nil && c.notes != nil && r.method != http.MethodGet {
			c.notes.record(c.res, metaOf(obj))
		}
		return err
	})
	return obj, err
}
