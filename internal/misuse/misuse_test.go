package misuse

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// Mistakes before Start are returned, all of them; after, each is logged.
func TestErrs_KeptUntilStartThenLogged(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var e Errs
	if err := e.Err(); err != nil {
		t.Fatalf("Err() with none = %v, want nil", err)
	}
	one := errors.New("kctl: one")
	two := errors.New("kctl: two")
	e.Add(one, false, log)
	e.Add(two, false, log)
	e.Add(errors.New("kctl: late"), true, log)
	err := e.Err()
	if !errors.Is(err, one) || !errors.Is(err, two) || strings.Contains(err.Error(), "late") {
		t.Errorf("Err() = %v, want one and two, not late", err)
	}
	want := `level=ERROR msg="kctl: late (made after Manager.Start, so it is not returned by Start)"`
	if got := strings.TrimSpace(buf.String()); !strings.HasSuffix(got, want) {
		t.Errorf("logged %q, want it to end with %q", got, want)
	}
}
