package kctltest

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"

	"k8s.io/klog/v2"
)

// KlogEnv names the variable that, when set, is a file to which the test
// binary appends klog's lines; see routeKlog.
const KlogEnv = "KCTLTEST_KLOG"

// klogKeep bounds the klog lines kept for the end of the test binary's
// output: past it, the oldest go.
const klogKeep = 1 << 20

// klogSink is where klog writes in a test binary that uses kctltest: the
// file $KCTLTEST_KLOG, or else a buffer of the last klogKeep bytes, which
// flush prints at the end of the test binary's output, after every test.
type klogSink struct {
	mu      sync.Mutex
	file    *os.File     // nil: buf
	buf     bytes.Buffer // whole lines
	dropped int          // lines dropped from buf
	lines   int          // lines written
}

var klogRoute = sync.OnceValue(routeKlog)

// routeKlog sends klog's lines (client-go's own: request logs at -v=6 and
// above, warnings, errors) to one place, never to a test's output nor to
// the test binary's standard error while tests run: klog is process-wide,
// so Go cannot tell which test made a line, and go test would show it
// between the lines of whichever test ran then. It keeps klog's verbosity
// (-v) as the program set it.
func routeKlog() *klogSink {
	s := &klogSink{}
	if path := os.Getenv(KlogEnv); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kctltest: %s=%s: %v; klog's lines are kept for the end of the output instead\n", KlogEnv, path, err)
		} else {
			s.file = f
		}
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for name, value := range map[string]string{
		"logtostderr":      "false",
		"alsologtostderr":  "false",
		"stderrthreshold":  "FATAL",
		"one_output":       "true", // each line once, not once per severity below it
		"skip_log_headers": "true",
	} {
		fs.Set(name, value) // klog's own flags: cannot fail
	}
	klog.ClearLogger()
	klog.SetOutput(s)
	return s
}

func (s *klogSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines += bytes.Count(p, []byte("\n"))
	if s.file != nil {
		return s.file.Write(p)
	}
	s.buf.Write(p)
	for s.buf.Len() > klogKeep {
		_, err := s.buf.ReadBytes('\n')
		if err != nil {
			break
		}
		s.dropped++
	}
	return len(p), nil
}

// flush writes what klog wrote during the tests to w (the test binary's
// standard error), after the last test, or says where the file is.
func (s *klogSink) flush(w io.Writer) {
	klog.Flush()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lines == 0 {
		return
	}
	if s.file != nil {
		fmt.Fprintf(w, "kctltest: klog wrote %d lines (client-go's own log) to %s\n", s.lines, s.file.Name())
		return
	}
	fmt.Fprintf(w, "--- kctltest: klog's lines (client-go's own log: no test can own them; %s=FILE keeps them in FILE) ---\n", KlogEnv)
	if s.dropped > 0 {
		fmt.Fprintf(w, "(%d older lines dropped)\n", s.dropped)
	}
	w.Write(s.buf.Bytes())
	fmt.Fprintf(w, "--- kctltest: end of klog's lines ---\n")
	s.buf.Reset()
}
