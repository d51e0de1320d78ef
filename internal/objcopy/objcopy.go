// Package objcopy copies an object of any Go type so that the copy shares
// no memory with it: by the type's DeepCopyInto method, or through JSON.
package objcopy

import (
	"encoding/json"
	"fmt"
	"strings"
)

// deepCopier is P = *T of a type with a DeepCopyInto method (k8s.io/api
// types, CRD types made with controller-gen).
type deepCopier[P any] interface{ DeepCopyInto(P) }

// Deep returns a copy of obj that shares no memory with it: by
// DeepCopyInto if *T has one (k8s.io/api types, CRD types made with
// controller-gen), else by a JSON round trip: json.Marshal, then
// json.Unmarshal into fresh(), a new T. A CRD struct without DeepCopyInto must
// therefore come back from encoding/json as it went in, as it must to
// travel to and from the API server anyway:
//
//   - every field that carries data is exported and not `json:"-"` (others
//     are zero in every copy);
//   - no field is a func, a channel or a complex number (json.Marshal
//     fails: Copyable reports it);
//   - a field of interface type comes back as map[string]any, []any,
//     float64, string or bool, not as the type it held: use concrete types;
//   - a type with a MarshalJSON method has an UnmarshalJSON that reads its
//     output back.
//
// A JSON copy costs a marshal and an unmarshal; a DeepCopyInto method avoids
// it. Deep panics if the round trip fails for one value (a MarshalJSON
// that fails). Deep(nil) is nil.
//
// Deep and Copyable take P = *T, not T, so that they are compiled once for
// every T (a function over T is compiled once for each).
func Deep[P any](obj P, fresh func() P) P {
	var none P
	if any(obj) == any(none) {
		return none
	}
	out := fresh()
	dc, ok := any(obj).(deepCopier[P])
	if ok {
		dc.DeepCopyInto(out)
		return out
	}
	err := jsonCopy(obj, out)
	if err != nil {
		panic(fmt.Sprintf("kctl: deep copy of %s through JSON: %v",
			typeName(out), err))
	}
	return out
}

// Copyable returns an error if Deep cannot copy a T, of which fresh
// returns a new one: T has no DeepCopyInto and the JSON round trip of its
// zero value fails.
func Copyable[P any](fresh func() P) error {
	_, ok := any(fresh()).(deepCopier[P])
	if ok {
		return nil
	}
	err := jsonCopy(fresh(), fresh())
	if err == nil {
		return nil
	}
	name := typeName(fresh())
	_, short, _ := strings.Cut(name, ".")
	return fmt.Errorf("kctl: %s cannot be copied through JSON (%w): "+
		"every field must survive json.Marshal and json.Unmarshal, "+
		"or give *%s a DeepCopyInto method", name, err, short)
}

// jsonCopy decodes the JSON encoding of in into out.
func jsonCopy(in, out any) error {
	b, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	return err
}

// typeName is the name of T, with its package's, of obj, a *T: e.g.
// "v1.Pod" or "main.Widget".
func typeName(obj any) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", obj), "*")
}
