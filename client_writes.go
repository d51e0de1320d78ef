package kctl

// A Client's writes: Create, Update, UpdateStatus and Delete. The
// further verbs (Patch, Apply, ApplyConfig, DeleteWithOptions,
// DeleteAllOf) are on floor 2, in client_more.go.

import (
	"context"
	"net/http"

	"github.com/kctl-dev/kctl/internal/transport"
)

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

// write sends obj with method (to its subresource sub, if any) and updates
// obj from the answer: Create, Update and UpdateStatus over P.
func (c *client[P]) write(
	ctx context.Context,
	verb, method string,
	obj P,
	sub string,
) error {
	if c.err != nil {
		return c.err
	}
	body, ct, err := c.codec.encode(obj)
	if err != nil {
		return err
	}
	m := metaOf(obj)
	r := request{
		verb:        verb,
		method:      method,
		namespace:   m.GetNamespace(),
		name:        m.GetName(),
		sub:         sub,
		body:        body,
		contentType: ct,
	}
	out, err := c.object(ctx, r)
	if err == nil {
		c.codec.ops.set(obj, out)
	}
	return err
}

// Delete deletes the object namespace/name; a missing object is NotFound.
// An object with finalizers is only marked for deletion. DeleteWithOptions
// adds preconditions and a propagation policy.
func (c *Client[T]) Delete(ctx context.Context, namespace, name string) error {
	return c.delete(ctx, namespace, name, nil)
}

// delete deletes the object namespace/name, sending body, a DeleteOptions
// (nil: none, the server's defaults). notes hears of the deletion, or of
// the object as the server answered it.
func (c *client[P]) delete(
	ctx context.Context,
	namespace, name string,
	body []byte,
) error {
	r := request{
		verb:      "delete",
		method:    http.MethodDelete,
		namespace: namespace,
		name:      name,
		body:      body,
	}
	if body != nil {
		r.contentType = mediaJSON
	}
	return c.call(ctx, r, func(ct string, body []byte) error {
		st, isStatus := transport.DecodeStatus(ct, body)
		switch {
		case c.notes == nil:
			// no one to tell
		case isStatus && st.Details != nil:
			// deleted
			c.notes.recordDelete(c.res, namespace, name, st.Details.UID)
		case !isStatus:
			// marked for deletion, or deleted and answered with its
			// last state
			obj, err := c.codec.decode(ct, body)
			if err == nil {
				c.notes.record(c.res, metaOf(obj))
			}
		}
		return nil
	})
}
