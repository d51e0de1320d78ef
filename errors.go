package kctl

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Every kctl error message starts with exactly one "kctl: ", however deep
// the chain of errors it wraps: an error that wraps another kctl error wraps
// it through unprefixed.
const errPrefix = "kctl: "

// unprefixed returns err, whose message may start with "kctl: ", showing its
// message without that prefix, so that a kctl error can wrap it with %w:
//
//	return fmt.Errorf("kctl: controller %q: %w", name, unprefixed(err))
//
// errors.Is and errors.As see through it. unprefixed(nil) is nil.
func unprefixed(err error) error {
	if err == nil {
		return nil
	}
	return unprefixedError{err}
}

type unprefixedError struct{ err error }

func (e unprefixedError) Error() string { return strings.TrimPrefix(e.err.Error(), errPrefix) }
func (e unprefixedError) Unwrap() error { return e.err }

// ErrNotInstalled matches (with errors.Is) the error of a call on a resource
// the API server does not serve: a CRD that is not applied, or an API group
// or version that is disabled or too new for the server. For a declared type
// the error says what the server serves in its group version when the
// declaration's Group, Version, Plural or Kind does not match (see
// Declare). Such an error also matches apierrors.IsNotFound, as the server's
// 404 would. It also matches a call on a subresource the server does not
// serve, e.g. UpdateStatus of a CRD without `subresources: {status: {}}`;
// that error does not match IsNotFound, since the object may well exist.
var ErrNotInstalled = errors.New("kctl: resource not installed")

// notInstalledError matches ErrNotInstalled, and status if not nil (the
// server's NotFound).
type notInstalledError struct {
	msg    string
	status error
}

func (e *notInstalledError) Error() string { return e.msg }

func (e *notInstalledError) Unwrap() []error {
	if e.status == nil {
		return []error{ErrNotInstalled}
	}
	return []error{ErrNotInstalled, e.status}
}

// notInstalledMessage says that c's resource is not served, and what to do.
func (c *Client[T]) notInstalledMessage() string {
	if c.codec.builtin {
		return fmt.Sprintf("kctl: %s is not served by the API server: the server is too old or too new for it, or its API group is disabled", c.res)
	}
	return fmt.Sprintf("kctl: %s is not installed on the API server: apply its CRD", c.res)
}

// statusError turns a failed answer to r into an error wrapping *apierrors.StatusError.
func (c *Client[T]) statusError(r request, resp *http.Response, body []byte) error {
	st, ok := decodeStatus(resp.Header.Get("Content-Type"), body)
	se := &apierrors.StatusError{ErrStatus: *st}
	if !ok {
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		se = apierrors.NewGenericServerResponse(resp.StatusCode, r.method, schema.GroupResource{Group: c.res.Group, Resource: c.res.Plural},
			r.name, string(body[:min(len(body), 512)]), ra, true)
	}
	if resp.StatusCode == http.StatusNotFound && (!ok || st.Details == nil || st.Details.Name == "" && st.Details.Kind == "") {
		return &notInstalledError{c.notInstalledMessage(), se}
	}
	if apierrors.IsForbidden(se) {
		rbac := map[string]string{"update status of": "update", "apply": "patch", "delete all of": "deletecollection"}[r.verb]
		return fmt.Errorf("kctl: %s %s: %w: grant this identity RBAC permission to %s %s",
			r.verb, c.what(r), se, cmp.Or(rbac, r.verb), strings.TrimSuffix(c.res.Plural+"/"+r.sub, "/"))
	}
	return fmt.Errorf("kctl: %s %s: %w", r.verb, c.what(r), se)
}
