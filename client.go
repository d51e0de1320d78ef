package kctl

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
)

// LoadConfig finds the cluster configuration: the kubeconfig path given (a
// --kubeconfig flag), else $KUBECONFIG, else the in-cluster service account,
// else ~/.kube/config.
func LoadConfig(kubeconfig string) (*rest.Config, error) { panic("stub") }

// Conn is one connection to an API server, shared by every Client made from it.
type Conn struct{}

// NewConn makes a Conn from cfg.
func NewConn(cfg *rest.Config) (*Conn, error) { panic("stub") }

// ListOptions selects objects for List and DeleteAllOf.
type ListOptions struct {
	Namespace string          // "" means every namespace
	Labels    labels.Selector // nil matches everything
	Fields    string          // a field selector, e.g. "spec.nodeName=node-1"
}

// Client is a typed handle on one resource.
type Client[T any] struct {
	// cache, when set, serves Get and List (copies); writes always go to the server.
	cache func(ctx context.Context) (*Informer[T], error)
	// afterWrite, when set, is called with every object the server returned from a write.
	afterWrite func(obj metav1.Object)
}

// NewClient returns an uncached client for T.
func NewClient[T any, PT Object[T]](conn *Conn) *Client[T] { panic("stub") }

func (c *Client[T]) Get(ctx context.Context, namespace, name string) (*T, error) { panic("stub") }
func (c *Client[T]) List(ctx context.Context, opts ListOptions) ([]*T, error)     { panic("stub") }
func (c *Client[T]) Create(ctx context.Context, obj *T) error                    { panic("stub") }
func (c *Client[T]) Update(ctx context.Context, obj *T) error                    { panic("stub") }
func (c *Client[T]) UpdateStatus(ctx context.Context, obj *T) error              { panic("stub") }
func (c *Client[T]) Delete(ctx context.Context, namespace, name string) error    { panic("stub") }

// listPage is one List request; cache.go pages through it.
func (c *Client[T]) listPage(ctx context.Context, opts ListOptions, resourceVersion string, limit int64, continueToken string) ([]*T, metav1.ListMeta, error) {
	panic("stub")
}

// watch opens a watch from resourceVersion with bookmarks; it ends after timeout.
func (c *Client[T]) watch(ctx context.Context, opts ListOptions, resourceVersion string, timeout time.Duration) (*watchStream[T], error) {
	panic("stub")
}

// watchEvent is one decoded watch event.
type watchEvent[T any] struct {
	Type   string         // "ADDED", "MODIFIED", "DELETED", "BOOKMARK" or "ERROR"
	Object *T             // nil for ERROR and when Err is set
	Status *metav1.Status // the server's status for ERROR
	Err    error          // this event's object failed to decode; the stream goes on
}

type watchStream[T any] struct{}

// Next returns the next event; an error ends the stream (io.EOF when the server closed it cleanly).
func (w *watchStream[T]) Next() (watchEvent[T], error) { panic("stub") }
func (w *watchStream[T]) Close() error                 { panic("stub") }
