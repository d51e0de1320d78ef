// Package misuse collects the mistakes made building a kctl Manager and
// its controllers (a controller without a type, two of one name, ...):
// until Start they are kept for Start to return, never panicked on;
// after, Start can return none, so each is logged as an error.
package misuse

import (
	"errors"
	"log/slog"
)

// ErrStartTwice is Manager.Start's error when it is called again.
var ErrStartTwice = errors.New("kctl: Manager.Start called twice: " +
	"a Manager runs once; make a new one to start again")

// Errs holds the mistakes made before Start. The zero value is ready to
// use. It is not goroutine-safe: the Manager holds its lock.
type Errs struct {
	errs []error
}

// Add records err for Start to return, or, once started (Start has
// begun), logs it to log as an error.
func (e *Errs) Add(err error, started bool, log *slog.Logger) {
	if started {
		log.Error(err.Error() +
			" (made after Manager.Start, so it is not returned by Start)")
		return
	}
	e.errs = append(e.errs, err)
}

// Err is every mistake recorded, joined; nil if none.
func (e *Errs) Err() error { return errors.Join(e.errs...) }
