package kctl

import "strings"

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
