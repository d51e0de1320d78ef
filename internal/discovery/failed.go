package discovery

// A failed answer to a call made an error: the server's Status wrapped
// with the call, the RBAC permission a Forbidden call lacks, and a 404 of
// a resource or subresource the server does not serve.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/kctl-dev/kctl/internal/transport"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Failed is the error of resp, a failed answer to call on res (Failed
// reads its body; the caller closes it): the server's Status as an
// *apierrors.StatusError (transport.StatusError) wrapped with call's Verb
// and What, a Forbidden one naming the RBAC permission to grant. A 404
// whose Status names no object is the server having no such resource: a
// *NotServed, after which the next Check asks the server again; for a
// call on a subresource, the *NotServed of Check if it finds the server
// does not serve that subresource.
func (d *Cache) Failed(
	ctx context.Context,
	get Fetch,
	res Declared,
	call Call,
	resp *http.Response,
) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	gr := schema.GroupResource{
		Group:    res.Group,
		Resource: res.Plural,
	}
	se, namesObject := transport.StatusError(
		resp, body, call.Method, gr, call.Name)
	if resp.StatusCode != http.StatusNotFound || namesObject {
		return wrapStatus(se, res, call)
	}
	notInstalled := &NotServed{Msg: NotInstalled(res), Status: se}
	// the next check asks the server again
	d.Outdated(ctx, res.APIVersion())
	if call.Sub == "" {
		return notInstalled
	}
	// The server has no route for a subresource it does not serve (e.g. a
	// ConfigMap's status): say so.
	err := d.Check(ctx, get, res, call)
	var notServed *NotServed
	if errors.As(err, &notServed) {
		return err
	}
	return notInstalled
}

// wrapStatus is se, the server's answer to call on res, wrapped with
// call's Verb and What; a Forbidden one names the permission to grant.
func wrapStatus(se *apierrors.StatusError, res Declared, call Call) error {
	if apierrors.IsForbidden(se) {
		lacks := transport.Permission(call.Verb, res.Plural, call.Sub)
		return fmt.Errorf("kctl: %s %s: %w: "+
			"grant this identity RBAC permission to %s",
			call.Verb, call.What, se, lacks)
	}
	return fmt.Errorf("kctl: %s %s: %w", call.Verb, call.What, se)
}
