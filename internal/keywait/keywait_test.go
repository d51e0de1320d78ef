package keywait

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// due ends the waits due at now and returns their keys, in order.
func due(w *Waits[string], now time.Time) []string {
	var ks []string
	for e := range w.Due(now) {
		ks = append(ks, e.Key)
	}
	return ks
}

func TestWaits_EndInOrderOfEndThenOfSet(t *testing.T) {
	var w Waits[string]
	w.Fire = func() {}
	defer w.Reset()
	t0 := time.Now()
	w.Set("c", t0.Add(3), true, false, t0)
	w.Set("b", t0.Add(1), true, false, t0)
	w.Set("a", t0.Add(1), true, false, t0)
	w.Set("d", t0.Add(9), true, false, t0)
	if err := w.Check(); err != nil {
		t.Fatal(err)
	}
	if got := due(&w, t0.Add(3)); !slices.Equal(got, []string{"b", "a", "c"}) {
		t.Fatalf("due at 3: %q, want b, a, c", got)
	}
	if err := w.Check(); err != nil || w.Len() != 1 {
		t.Fatalf("after Due: Len %d, %v", w.Len(), err)
	}
}

func TestWaits_SetNeverPostponesAWaitToAdd(t *testing.T) {
	var w Waits[string]
	w.Fire = func() {}
	defer w.Reset()
	t0 := time.Now()
	w.Set("a", t0.Add(5), true, true, t0)
	w.Set("a", t0.Add(9), true, false, t0)  // later: only raises it
	w.Set("a", t0.Add(1), false, false, t0) // a hold: changes nothing
	got, _ := w.Get("a")
	if !got.At.Equal(t0.Add(5)) || got.Low || !got.Add {
		t.Fatalf("wait %+v, want at 5, normal, to add", got)
	}
	w.Set("a", t0.Add(2), true, true, t0) // earlier, but never low again
	got, _ = w.Get("a")
	if !got.At.Equal(t0.Add(2)) || got.Low {
		t.Fatalf("wait %+v, want at 2, normal", got)
	}
	w.Set("h", t0.Add(2), false, false, t0)
	w.Set("h", t0.Add(7), true, true, t0) // a hold is replaced
	got, _ = w.Get("h")
	if !got.At.Equal(t0.Add(7)) || !got.Add || !got.Low {
		t.Fatalf("wait %+v, want at 7, low, to add", got)
	}
}

func TestWaits_TheTimerFiresWhenTheFirstWaitEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w Waits[string]
		fired := 0
		w.Fire = func() { fired++ }
		t0 := time.Now()
		w.Set("a", t0.Add(time.Second), true, false, t0)
		w.Set("b", t0.Add(time.Minute), true, false, t0)
		time.Sleep(time.Second)
		synctest.Wait()
		if fired != 1 || !slices.Equal(due(&w, time.Now()), []string{"a"}) {
			t.Fatalf("after 1s: fired %d times", fired)
		}
		if err := w.Check(); err != nil {
			t.Fatal(err)
		}
		w.Reset()
		time.Sleep(time.Hour)
		synctest.Wait()
		if fired != 1 || w.Len() != 0 {
			t.Fatalf("after Reset: fired %d times, %d waits", fired, w.Len())
		}
	})
}
