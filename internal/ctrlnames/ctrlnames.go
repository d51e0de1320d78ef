// Package ctrlnames keeps the names of a kctl Manager's controllers: a
// name is taken once per Manager (metrics and logs are keyed by it), and
// the error of a second controller of the same name says what made each
// one, with the file and line that made it (Caller). It also names each
// reconcile in the logs (ReconcileID).
package ctrlnames

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"runtime"
)

// Taken holds, by controller name, what made it ("ConfigMap, made at
// main.go:42"). The zero value is ready to use. It is not
// goroutine-safe: the Manager holds its lock around Take.
type Taken struct {
	made map[string]string
}

// Take takes name for the controller made says made it, or returns the
// error naming both, if a controller made before has it.
func (t *Taken) Take(name string, made string) error {
	first, taken := t.made[name]
	if taken {
		return fmt.Errorf("kctl: two controllers are named %q: "+
			"one of %s, and one of %s; "+
			"give each a name of its own "+
			"(metrics and logs are keyed by it)",
			name, first, made)
	}
	if t.made == nil {
		t.made = map[string]string{}
	}
	t.made[name] = made
	return nil
}

// Caller names the file and line that called the function that calls
// Caller (NewController), e.g. "main.go:42".
func Caller() string {
	_, file, line, ok := runtime.Caller(2)
	if !ok {
		return "an unknown place"
	}
	return fmt.Sprintf("%s:%d", filepath.Base(file), line)
}

// ReconcileID is a new reconcileID, the attribute that tells one
// reconcile's log lines from another's: 16 random hex digits.
func ReconcileID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
