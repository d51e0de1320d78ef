// Package nomain_test is a package whose tests have no TestMain, as a user
// may forget it: kctltest.Start fails them, saying what to add.
package nomain_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl/kctltest"
)

// fatalTB records the message of Fatal or Fatalf and ends the goroutine, as
// t.Fatal does, so that this test can pass when Start fails its test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestStart_WithoutMain_FailsTheTestAndNamesTheFix(t *testing.T) {
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		kctltest.Start(tb)
	}()
	<-done
	if want := "func TestMain(m *testing.M) { os.Exit(kctltest.Main(m)) }"; !strings.Contains(tb.msg, want) {
		t.Errorf("Start in a package without TestMain: failure %q, want one containing %q", tb.msg, want)
	}
}
