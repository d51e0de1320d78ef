package discovery

// A declared resource checked against the server's discovery document,
// and the errors that name the difference and the fix.

import (
	"context"
	"errors"
	"fmt"

	"github.com/kctl-dev/kctl/internal/apitype"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Declared is a resource as a program declares it.
type Declared struct {
	apitype.Resource
	// Builtin: a k8s.io/api type's, whose fixes are not a CRD's.
	Builtin bool
	// TypeName is the Go type's, e.g. "main.Widget", for errors.
	TypeName string
}

// Call is the call checked: Verb and What name it in errors ("update
// status of", "widgets.example.com/v1 shop/w"); Sub is its subresource;
// Method and Name (of its object, "" for a collection) go in the
// details of a Status the server did not send (see Failed).
type Call struct {
	Verb   string
	What   string
	Sub    string
	Method string
	Name   string
}

// ErrNotInstalled is kctl.ErrNotInstalled, which every *NotServed
// matches.
var ErrNotInstalled = errors.New("kctl: resource not installed")

// NotServed is the error of a resource or subresource the server does
// not serve: it matches ErrNotInstalled, and Status if not nil (the
// NotFound the server would have answered the call).
type NotServed struct {
	Msg    string
	Status error
}

func (e *NotServed) Error() string { return e.Msg }

func (e *NotServed) Unwrap() []error {
	if e.Status == nil {
		return []error{ErrNotInstalled}
	}
	return []error{ErrNotInstalled, e.Status}
}

// Check checks res, and call's subresource if any, against the server's
// discovery document of res's group version (Lookup, asking with get):
// nil if the server serves them as declared, else an error naming the
// difference and the fix; a *NotServed if it does not serve them.
func (d *Cache) Check(ctx context.Context, get Fetch, res Declared, call Call) error {
	name := res.Plural
	if call.Sub != "" {
		name += "/" + call.Sub
	}
	gv := res.APIVersion()
	resources, err := d.Lookup(ctx, get, gv, name)
	if err != nil {
		return err
	}
	got, ok := resources[res.Plural]
	_, subOK := resources[name]
	sameKind := got.Kind == res.Kind
	sameScope := got.Namespaced == res.Namespaced
	if ok && subOK && sameKind && sameScope {
		return nil
	}
	return disagreement(resources, res, call)
}

// NotInstalled says that res is not served, and what to do.
func NotInstalled(res Declared) string {
	if res.Builtin {
		return fmt.Sprintf("kctl: %s is not served by the API server: "+
			"the server is too old or too new for it, "+
			"or its API group is disabled", res)
	}
	return fmt.Sprintf("kctl: %s is not installed on the API server: "+
		"apply its CRD", res)
}

// disagreement is the error of Check when resources, a discovery
// document of res's group version, does not serve call as res declares.
func disagreement(
	resources map[string]metav1.APIResource,
	res Declared,
	call Call,
) error {
	gv := res.APIVersion()
	plural := res.Plural
	declare := "kctl.Declare[" + res.TypeName + "]"
	got, ok := resources[plural]
	switch {
	case resources == nil:
		why := fmt.Sprintf("the server serves no group version %s: "+
			"check Group and Version in %s", gv, declare)
		return notServed(res, why)
	case !ok:
		served := ListServed(resources)
		why := fmt.Sprintf("%s serves %s: "+
			"correct Plural or Kind in %s", gv, served, declare)
		return notServed(res, why)
	case got.Kind != res.Kind:
		return fmt.Errorf("kctl: %s serves %s as kind %s, not %s: "+
			"correct Kind in %s",
			gv, plural, got.Kind, res.Kind, declare)
	case got.Namespaced && !res.Namespaced:
		return fmt.Errorf("kctl: %s serves %s namespaced, "+
			"but %s declares them cluster-scoped: "+
			"add Namespaced: true to it", gv, plural, declare)
	case !got.Namespaced && res.Namespaced:
		return fmt.Errorf("kctl: %s serves %s cluster-scoped, "+
			"but %s declares them namespaced: "+
			"remove Namespaced: true from it", gv, plural, declare)
	}
	fix := fmt.Sprintf("add `subresources: {%s: {}}` "+
		"to version %s of their CRD", call.Sub, res.Version)
	if res.Builtin {
		fix = "write the whole object instead"
	}
	msg := fmt.Sprintf("kctl: %s %s: "+
		"the server serves no %s subresource of %s: %s",
		call.Verb, call.What, call.Sub, plural, fix)
	return &NotServed{Msg: msg}
}

// notServed is the error of a call on res, which the server does not
// serve (why says what it serves instead): it matches NotFound, as the
// server's answer to the call would.
func notServed(res Declared, why string) error {
	gr := schema.GroupResource{
		Group:    res.Group,
		Resource: res.Plural,
	}
	nf := apierrors.NewNotFound(gr, "")
	msg := NotInstalled(res) + " (" + why + ")"
	return &NotServed{Msg: msg, Status: nf}
}
