package shutdown

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Nothing abandoned logs nothing; else one error names the work.
func TestLogAbandoned_LogsOnlyWhatIsAbandoned(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	LogAbandoned(log, time.Second, nil)
	LogAbandonedTerm(log, time.Second, nil)
	if buf.Len() != 0 {
		t.Fatalf("nothing abandoned logged %q", buf.String())
	}
	LogAbandoned(log, time.Second, []string{"cache"})
	LogAbandonedTerm(log, time.Second, []string{"controller a"})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("logged %d lines, want 2: %q", len(lines), buf.String())
	}
	for i, want := range []string{
		`level=ERROR msg="kctl: shutdown timeout passed: Start returns while these still run, ignoring their context" timeout=1s abandoned=[cache]`,
		`level=ERROR msg="kctl: shutdown timeout passed: abandoning leader work that ignores its context; the lease is released, so another replica may start on the same objects" timeout=1s abandoned="[controller a]"`,
	} {
		if !strings.HasSuffix(lines[i], want) {
			t.Errorf("line %d = %q, want it to end with %q", i, lines[i], want)
		}
	}
}

func TestAddTooLate_NamesTheRunnable(t *testing.T) {
	want := `kctl: Add("web") after Start, while the Manager shuts down: it would never run; add it before the Manager's context ends`
	if got := AddTooLate("web").Error(); got != want {
		t.Errorf("AddTooLate = %q, want %q", got, want)
	}
}
