// Package errtext is how kctl's errors read when one wraps another: each
// message starts with exactly one "kctl: ", however deep the chain.
package errtext

import "strings"

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
