package watchretry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDelay_DoublesUpToTheCapWithJitterAndRetryAfter(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		n          int
		r          float64
		retryAfter time.Duration
		want       time.Duration
	}{
		{1, 0, 0, 200 * ms},
		{2, 0, 0, 400 * ms},
		{1, 0.5, 0, 150 * ms},
		{1, 0.999999, 0, 100 * ms},
		{8, 0, 0, 25600 * ms},
		{9, 0, 0, 30 * time.Second},
		{1000, 0, 0, 30 * time.Second},
		{1, 0, 5 * time.Second, 5 * time.Second},
	} {
		if got := Delay(c.n, 30*time.Second, c.r, c.retryAfter).Round(ms); got != c.want {
			t.Errorf("Delay(%d, 30s, %v, %v) = %v, want %v", c.n, c.r, c.retryAfter, got, c.want)
		}
	}
}

func TestGone_RecognizesEveryFormOfTooOld(t *testing.T) {
	gr := corev1.Resource("configmaps")
	for _, c := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewResourceExpired("too old resource version: 1 (5)"), true},
		{apierrors.NewGone("gone"), true},
		{&apierrors.StatusError{ErrStatus: metav1.Status{Code: 410, Message: "expired"}}, true},
		{fmt.Errorf("kctl: watch: %w", apierrors.NewResourceExpired("The provided continue parameter is too old")), true},
		{errors.New("too old resource version: 1 (5)"), true},
		{apierrors.NewNotFound(gr, "x"), false},
		{apierrors.NewForbidden(gr, "x", errors.New("no")), false},
	} {
		if got := Gone(c.err); got != c.want {
			t.Errorf("Gone(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestWait_CapsAtTheLimitOfTheFailureAndHonoursRetryAfter(t *testing.T) {
	tooMany := apierrors.NewTooManyRequests("slow down", 20)
	for _, c := range []struct {
		n            int
		err          error
		notInstalled bool
		lo, hi       time.Duration
	}{
		{1, errors.New("refused"), false, 100 * time.Millisecond, 200 * time.Millisecond},
		{20, errors.New("refused"), false, 15 * time.Second, 30 * time.Second},
		{20, errors.New("no such CRD"), true, 5 * time.Second, 10 * time.Second},
		{1, tooMany, false, 20 * time.Second, 20 * time.Second},
	} {
		for range 100 {
			if got := Wait(c.n, c.err, c.notInstalled); got < c.lo || got > c.hi {
				t.Fatalf("Wait(%d, %v, %v) = %v, want in [%v, %v]", c.n, c.err, c.notInstalled, got, c.lo, c.hi)
			}
		}
	}
}

func TestTimeout_FixedOrFiveToTenMinutes(t *testing.T) {
	if got := Timeout(3 * time.Second); got != 3*time.Second {
		t.Errorf("Timeout(3s) = %v, want 3s", got)
	}
	for range 100 {
		if got := Timeout(0); got < 5*time.Minute || got >= 10*time.Minute {
			t.Fatalf("Timeout(0) = %v, want in [5m, 10m)", got)
		}
	}
}

// Pause logs the failure with its wait, at Warn or, quiet, at Debug, and
// returns when ctx ends rather than after the wait.
func TestPause_LogsTheFailureAndItsWaitUntilCtxEnds(t *testing.T) {
	var buf bytes.Buffer
	opts := &slog.HandlerOptions{Level: slog.LevelDebug}
	log := slog.New(slog.NewTextHandler(&buf, opts))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	boom := errors.New("boom")
	Pause(ctx, log, false, 3, boom, false, "list failed", "resource", "pods")
	Pause(ctx, log, true, 1, boom, true, "list failed", "resource", "crds")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("logged %q, want two lines", lines)
	}
	for j, want := range []string{"level=WARN msg=\"list failed\" resource=pods retryIn=", "level=DEBUG msg=\"list failed\" resource=crds retryIn="} {
		if !strings.Contains(lines[j], want) {
			t.Errorf("line %d = %q, want it to contain %q", j, lines[j], want)
		}
	}
	if !strings.Contains(lines[0], "failures=3 err=boom") {
		t.Errorf("line 0 = %q, want failures=3 err=boom", lines[0])
	}
}
