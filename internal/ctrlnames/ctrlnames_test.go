package ctrlnames

import (
	"strings"
	"testing"
)

// A name is taken once; the error of a second names what made each.
func TestTaken_Take_ANameOnce(t *testing.T) {
	var names Taken
	if err := names.Take("a", "ConfigMap, made at main.go:1"); err != nil {
		t.Fatalf("Take(a) = %v, want nil", err)
	}
	if err := names.Take("b", "keys, made at main.go:2"); err != nil {
		t.Fatalf("Take(b) = %v, want nil", err)
	}
	err := names.Take("a", "Secret, made at main.go:3")
	want := `kctl: two controllers are named "a": one of ConfigMap, made at main.go:1, ` +
		`and one of Secret, made at main.go:3; give each a name of its own (metrics and logs are keyed by it)`
	if err == nil || err.Error() != want {
		t.Errorf("Take(a) again = %v, want %s", err, want)
	}
}

// made calls Caller as NewController does: for its caller.
func made() string { return Caller() }

// Caller names the file and line of its caller's caller.
func TestCaller_NamesTheCallersCaller(t *testing.T) {
	got := made()
	if !strings.HasPrefix(got, "ctrlnames_test.go:") {
		t.Errorf("Caller() = %q, want ctrlnames_test.go:<line>", got)
	}
}

// Each reconcileID is 16 hex digits, and two are not the same.
func TestReconcileID_SixteenHexDigitsEachNew(t *testing.T) {
	a := ReconcileID()
	b := ReconcileID()
	if len(a) != 16 || strings.Trim(a, "0123456789abcdef") != "" {
		t.Errorf("ReconcileID() = %q, want 16 hex digits", a)
	}
	if a == b {
		t.Errorf("two ReconcileIDs are both %q", a)
	}
}
