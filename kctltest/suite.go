package kctltest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
)

// suite is the TB that Main's setup functions get: it stands for the whole
// test binary. Its cleanups run after the last test; Fatal and Skip end
// the setup function (runtime.Goexit, as the testing package does).
type suite struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	cleanups []func()
	failures []string
	skipped  string // why the setup skipped, if it did
}

func newSuite() *suite {
	ctx, cancel := context.WithCancel(context.Background())
	return &suite{ctx: ctx, cancel: cancel}
}

func (s *suite) Helper()                  {}
func (s *suite) Name() string             { return "TestMain" }
func (s *suite) Context() context.Context { return s.ctx }

func (s *suite) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

func (s *suite) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kctltest: TestMain: "+format+"\n", args...)
}

func (s *suite) Errorf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, fmt.Sprintf(format, args...))
}

func (s *suite) Fatal(args ...any) {
	s.Errorf("%s", fmt.Sprint(args...))
	runtime.Goexit()
}

func (s *suite) Fatalf(format string, args ...any) {
	s.Errorf(format, args...)
	runtime.Goexit()
}

func (s *suite) Skip(args ...any) {
	s.mu.Lock()
	s.skipped = fmt.Sprint(args...)
	s.mu.Unlock()
	runtime.Goexit()
}

// run calls setup with s and env in a goroutine of its own (Fatal ends
// it), and returns what failed, or nil.
func (s *suite) run(setup func(t TB, env *Env) error) error {
	done := make(chan error, 1)
	go func() {
		var err error
		defer func() { done <- err }() // also after runtime.Goexit
		env := Start(s)
		err = setup(s, env)
	}()
	err := <-done
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.failures {
		err = errors.Join(err, errors.New(f))
	}
	return err
}

// skippedWhy says why a setup skipped ("" if none did): the control plane
// could not start, and the tests skip as well.
func (s *suite) skippedWhy() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.skipped
}

// close ends the context and runs the cleanups, last registered first.
func (s *suite) close() {
	s.cancel()
	s.mu.Lock()
	fs := slices.Clone(s.cleanups)
	s.mu.Unlock()
	slices.Reverse(fs)
	for _, f := range fs {
		f()
	}
}
