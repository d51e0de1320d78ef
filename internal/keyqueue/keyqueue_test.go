package keyqueue

import (
	"testing"
	"time"
)

// The rules run without a lock or a goroutine: a key added while
// processing is queued again at Done, once, and a low add of a queued
// key changes nothing.
func TestKeys_ReAddWhileProcessing_IsQueuedAgainAtDone(t *testing.T) {
	now := time.Unix(0, 0)
	s := New[string](Options{Age: time.Minute}, func() {})
	check := func(step string, got, want int) {
		t.Helper()
		if err := s.Check(); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got != want {
			t.Fatalf("%s: %d, want %d", step, got, want)
		}
	}
	check("Add a", s.Add("a", 0, false, now), 1)
	check("Add a again", s.Add("a", 0, false, now), 0)
	check("AddLowPriority a, queued", s.Add("a", 0, true, now), 0)
	k, _ := s.Pop(now)
	check("Pop", s.Len(), 0)
	check("Add a, processing", s.Add(k, 0, false, now), 0)
	check("Add a, processing, again", s.Add(k, 0, true, now), 0)
	added, _, ok := s.Done(k, now.Add(time.Second))
	check("Done a", added, 1)
	check("Len", s.Len(), 1)
	if _, _, ok2 := s.Done("b", now); !ok || ok2 {
		t.Fatalf("Done(a) ok=%v, Done(b) ok=%v; want true, false", ok, ok2)
	}
	s.Close()
	check("Add after Close", s.Add("c", 0, false, now), 0)
	check("Kept after Close", s.Kept(), 0)
}

func TestNew_DefaultsAgeAndLimitsPacing(t *testing.T) {
	s := New[string](Options{Debounce: -time.Second, MinInterval: -time.Second}, func() {})
	want := Options{Age: time.Minute}
	if s.opts != want {
		t.Errorf("New(negative pacing, no Age).opts = %+v, want %+v", s.opts, want)
	}
	set := Options{Debounce: time.Second, MinInterval: 2 * time.Second, Age: 3 * time.Second}
	if s := New[string](set, func() {}); s.opts != set {
		t.Errorf("New(%+v).opts = %+v, want it kept", set, s.opts)
	}
	if s := New[string](Options{Age: -time.Second}, func() {}); s.opts.Age != time.Minute {
		t.Errorf("New(negative Age).opts.Age = %v, want a minute", s.opts.Age)
	}
}

// Drained is closed by Close when no key is processing, else by the
// last Done after Close; a second Close does nothing.
func TestKeys_Drained_AtCloseOrAtTheLastDoneAfterIt(t *testing.T) {
	now := time.Unix(0, 0)
	isDrained := func(s *Keys[string]) bool {
		select {
		case <-s.Drained():
			return true
		default:
			return false
		}
	}
	idle := New[string](Options{}, func() {})
	idle.Close()
	idle.Close()
	if !isDrained(idle) {
		t.Error("Close with nothing processing: not drained")
	}
	busy := New[string](Options{}, func() {})
	busy.Add("a", 0, false, now)
	busy.Add("b", 0, false, now)
	a, _ := busy.Pop(now)
	b, _ := busy.Pop(now)
	busy.Close()
	busy.Done(a, now)
	if isDrained(busy) {
		t.Error("drained with b still processing")
	}
	if err := busy.Check(); err != nil {
		t.Fatal(err)
	}
	busy.Done(b, now)
	if !isDrained(busy) {
		t.Error("the last Done after Close: not drained")
	}
	if err := busy.Check(); err != nil {
		t.Fatal(err)
	}
}

// Drain closes s and returns the ends of its wait: a Shut closes stop
// (every Drain before it shares the one stop), and a Drain after that
// Shut gets a new stop, open.
func TestKeys_Drain_StopIsClosedByTheNextShut(t *testing.T) {
	now := time.Unix(0, 0)
	isClosed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	s := New[string](Options{}, func() {})
	s.Add("a", 0, false, now)
	a, _ := s.Pop(now)
	drained, stop := s.Drain()
	_, stop2 := s.Drain()
	if !s.Closed() || isClosed(drained) || isClosed(stop) {
		t.Fatalf("Drain with a processing: closed=%v, drained=%v, stopped=%v; want true, false, false",
			s.Closed(), isClosed(drained), isClosed(stop))
	}
	s.Shut()
	if !isClosed(stop) || !isClosed(stop2) {
		t.Error("Shut did not close the stop of every Drain before it")
	}
	_, stop3 := s.Drain()
	if isClosed(stop3) {
		t.Error("a Drain after Shut got a closed stop")
	}
	s.Shut()
	s.Shut() // no Drain waits: nothing to close
	s.Done(a, now)
	if !isClosed(drained) {
		t.Error("the last Done after Drain: not drained")
	}
}
