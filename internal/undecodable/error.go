package undecodable

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/kctl-dev/kctl/internal/transport"
)

// Error is the error of an object that does not decode into the cache's
// type. Its metadata is then decoded alone, so that the object's key is
// still known (the cache needs it to delete the object, or to keep it
// across a relist); Name is "" only if even the metadata does not decode.
type Error struct {
	Namespace       string
	Name            string
	ResourceVersion string
	// Err names the object.
	Err error
}

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// Decoding is the error of raw, an object's own bytes (protobuf if proto,
// else JSON) of resource that failed to decode with err: it names the
// object and carries its key if the metadata alone decodes
// (transport.ObjectMeta).
func Decoding(raw []byte, proto bool, resource string, err error) *Error {
	m := transport.ObjectMeta(raw, proto)
	what := resource
	switch {
	case m.Name == "":
	case m.Namespace == "":
		what += " " + m.Name
	default:
		what += " " + m.Namespace + "/" + m.Name
	}
	return &Error{
		Namespace:       m.Namespace,
		Name:            m.Name,
		ResourceVersion: m.ResourceVersion,
		Err:             fmt.Errorf("kctl: decoding %s: %w", what, err),
	}
}

// Keyed is the Error of an object a list of resource could not decode
// (err). One without a key (not even its metadata decoded) is logged
// (Keyless): the list then deletes no object from the cache, as any
// might be that one (Relist).
func Keyed(log *slog.Logger, resource string, err error) *Error {
	e, ok := errors.AsType[*Error](err)
	if ok && e.Name != "" {
		return e
	}
	Keyless(log, resource, err)
	return &Error{Err: err}
}
