// Package errtext is how kctl's errors read when one wraps another: each
// message starts with exactly one "kctl: ", however deep the chain; and
// the text of a list that left objects out (LeftOut).
package errtext

import (
	"errors"
	"fmt"
	"strings"
)

// Prefix starts every kctl error message.
const Prefix = "kctl: "

// Unprefixed returns err, whose message may start with Prefix, showing
// its message without that prefix, so that a kctl error can wrap it with
// %w (as kctl's own unprefixed does):
//
//	return fmt.Errorf("kctl: controller %q: %w", name, errtext.Unprefixed(err))
//
// errors.Is and errors.As see through it. Unprefixed(nil) is nil.
func Unprefixed(err error) error {
	if err == nil {
		return nil
	}
	return unprefixed{err}
}

type unprefixed struct{ err error }

func (e unprefixed) Error() string { return strings.TrimPrefix(e.err.Error(), Prefix) }

func (e unprefixed) Unwrap() error { return e.err }

// LeftOut is the error of a list of what (e.g. "pods/v1 in namespace
// shop") that left out the objects that could not be decoded, skipped
// naming each (Unprefixed, in place).
func LeftOut(what string, skipped []error) error {
	for i, e := range skipped {
		skipped[i] = Unprefixed(e)
	}
	joined := errors.Join(skipped...)
	return fmt.Errorf("kctl: list %s: left out %d "+
		"object(s) that could not be decoded: %w",
		what, len(skipped), joined)
}
