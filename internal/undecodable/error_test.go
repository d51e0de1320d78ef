package undecodable

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// Decoding names the object by the key its metadata gives, if any, and
// wraps the decoder's error.
func TestDecoding_NamesTheObjectIfItsMetadataDecodes(t *testing.T) {
	bad := errors.New("bad field")
	for _, tc := range []struct {
		raw                 string
		wantNS, wantName    string
		wantRV, wantMessage string
	}{
		{`{"metadata":{"namespace":"shop","name":"web","resourceVersion":"7"},"spec":1}`,
			"shop", "web", "7", "kctl: decoding pods/v1 shop/web: bad field"},
		{`{"metadata":{"name":"node-1"}}`,
			"", "node-1", "", "kctl: decoding pods/v1 node-1: bad field"},
		{`{"metadata":7}`,
			"", "", "", "kctl: decoding pods/v1: bad field"},
	} {
		e := Decoding([]byte(tc.raw), false, "pods/v1", bad)
		if e.Namespace != tc.wantNS || e.Name != tc.wantName || e.ResourceVersion != tc.wantRV {
			t.Errorf("Decoding(%s) key = %q/%q@%q, want %q/%q@%q", tc.raw,
				e.Namespace, e.Name, e.ResourceVersion, tc.wantNS, tc.wantName, tc.wantRV)
		}
		if e.Error() != tc.wantMessage || !errors.Is(e, bad) {
			t.Errorf("Decoding(%s) = %q (wraps bad: %v), want %q wrapping bad",
				tc.raw, e.Error(), errors.Is(e, bad), tc.wantMessage)
		}
	}
}

// Keyed returns a keyed Error as it is, even wrapped; one without a key,
// or another error, is logged (Keyless) and made an Error without a key.
func TestKeyed_LogsOnlyAnErrorWithoutAKey(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	keyed := &Error{Namespace: "shop", Name: "web", Err: errors.New("bad")}
	if got := Keyed(log, "pods/v1", fmt.Errorf("list: %w", keyed)); got != keyed || buf.Len() != 0 {
		t.Errorf("Keyed(keyed) = %v, logged %q; want it as it is, nothing logged", got, buf.String())
	}
	other := errors.New("no metadata")
	got := Keyed(log, "pods/v1", other)
	if got.Name != "" || got.Err != other {
		t.Errorf("Keyed(other) = %+v, want an Error without a key wrapping it", got)
	}
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "not even its metadata") {
		t.Errorf("Keyed(other) logged %q, want Keyless's warning", buf.String())
	}
}

// Skipped logs the event's type and error.
func TestSkipped_LogsTheEvent(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	Skipped(log, "pods/v1", "WEIRD", nil)
	for _, want := range []string{"level=WARN", "skipped a watch event", "resource=pods/v1", "event=WEIRD"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("Skipped logged %q, want %q in it", buf.String(), want)
		}
	}
}
