package warnings

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) count(substr string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), substr)
}

func newLog() (*Log, *lockedBuffer) {
	var buf lockedBuffer
	return New(slog.New(slog.NewTextHandler(&buf, nil))), &buf
}

func header(values ...string) http.Header {
	return http.Header{"Warning": values}
}

func TestHeader_LogsEachTextOnce(t *testing.T) {
	l, buf := newLog()
	for range 3 {
		l.Header(header(`299 - "v1beta1 is deprecated"`), "GET /a")
	}
	l.Header(header(`299 - "unknown field \"spec.x\"", 299 - "v1beta1 is deprecated"`), "PUT /b")
	l.Header(http.Header{}, "GET /c")
	if n := buf.count(`warning="v1beta1 is deprecated" request="GET /a"`); n != 1 {
		t.Errorf("the deprecation was logged %d times, want once, with its first request:\n%s", n, buf.buf.String())
	}
	if n := buf.count(`warning="unknown field \"spec.x\"" request="PUT /b"`); n != 1 {
		t.Errorf("the unknown field was logged %d times, want once:\n%s", n, buf.buf.String())
	}
	if n := buf.count("level=WARN msg=\"the API server warns\""); n != 2 {
		t.Errorf("%d lines, want 2 at WARN:\n%s", n, buf.buf.String())
	}
}

func TestHeader_SkipsOtherCodesAndMalformedHeaders(t *testing.T) {
	l, buf := newLog()
	l.Header(header(`199 - "miscellaneous"`, `299 - ""`, `not a warning`, `299 - "kept"`), "GET /a")
	if got := buf.count("msg="); got != 1 || buf.count(`warning=kept`) != 1 {
		t.Errorf("logged:\n%s\nwant only the 299 warning \"kept\"", buf.buf.String())
	}
}

func TestHeader_MemoryIsBoundedByMax_OldestForgottenFirst(t *testing.T) {
	l, buf := newLog()
	for i := range 3 * Max {
		l.Header(header(fmt.Sprintf(`299 - "text %d"`, i)), "GET /a")
		if len(l.seen) > Max {
			t.Fatalf("after %d texts it remembers %d, want at most %d", i+1, len(l.seen), Max)
		}
	}
	if len(l.seen) != Max {
		t.Errorf("remembers %d texts, want %d", len(l.seen), Max)
	}
	newest := fmt.Sprintf(`299 - "text %d"`, 3*Max-1)
	l.Header(header(newest), "GET /a")
	if n := buf.count(fmt.Sprintf(`"text %d"`, 3*Max-1)); n != 1 {
		t.Errorf("a remembered text was logged %d times, want once", n)
	}
	l.Header(header(`299 - "text 0"`), "GET /a")
	if n := buf.count(`"text 0"`); n != 2 {
		t.Errorf("a forgotten text was logged %d times, want twice (it comes back once forgotten)", n)
	}
}

func TestHeader_ConcurrentCallsLogOnce(t *testing.T) {
	l, buf := newLog()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				l.Header(header(`299 - "same"`), "GET /a")
			}
		}()
	}
	wg.Wait()
	if n := buf.count("warning=same"); n != 1 {
		t.Errorf("logged %d times from 8 goroutines, want once", n)
	}
}
