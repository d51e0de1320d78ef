package causes

import "testing"

type cause struct {
	name   string
	merged int
}

func count(first *cause, later cause) { first.merged++ }

// The first cause since a key was taken wins; later ones merge into it.
func TestLedger_Queue_FirstCauseWinsAndLaterOnesMerge(t *testing.T) {
	var l Ledger[string, cause]
	l.Queue("a", cause{name: "created"}, count)
	l.Queue("a", cause{name: "updated"}, count)
	l.Queue("a", cause{name: "deleted"}, count)
	l.Queue("b", cause{name: "resync"}, count)
	if got := l.Queued("a"); got == nil || got.name != "created" || got.merged != 2 {
		t.Errorf("a: %+v, want created with 2 merged", got)
	}
	if got := l.Queued("b"); got == nil || got.name != "resync" || got.merged != 0 {
		t.Errorf("b: %+v, want resync with none merged", got)
	}
	l.Take("a")
	l.Queue("a", cause{name: "updated"}, count)
	if got := l.Queued("a"); got == nil || got.name != "updated" || got.merged != 0 {
		t.Errorf("a after Take: %+v, want updated, the first since it was taken", got)
	}
}

// A queued cause wins over a wait's; Take drops both; nil if none.
func TestLedger_Take_QueuedCauseWinsOverTheWaitAndBothGo(t *testing.T) {
	var l Ledger[string, cause]
	l.Wait("a", cause{name: "retry"})
	l.Queue("a", cause{name: "updated"}, count)
	l.Wait("b", cause{name: "requeue-after"})
	if got := l.Take("a"); got == nil || got.name != "updated" {
		t.Errorf("Take(a) = %+v, want updated (the event wins over the retry)", got)
	}
	if got := l.Waiting("a"); got != nil {
		t.Errorf("Take(a) left a's retry: %+v", got)
	}
	if got := l.Take("b"); got == nil || got.name != "requeue-after" {
		t.Errorf("Take(b) = %+v, want requeue-after (the wait ended)", got)
	}
	if got := l.Take("b"); got != nil {
		t.Errorf("Take(b) again = %+v, want nil", got)
	}
	if len(l.queued) != 0 || len(l.later) != 0 {
		t.Errorf("after the Takes: %d queued, %d later; want none", len(l.queued), len(l.later))
	}
}

// Queue closes the channel Open made, once, and ignores keys without one;
// Done forgets it.
func TestLedger_QueueClosesTheOpenChannelOnce(t *testing.T) {
	var l Ledger[string, cause]
	ch := l.Open("a")
	l.Queue("b", cause{name: "created"}, count) // not worked on: nothing to close
	select {
	case <-ch:
		t.Fatal("a's channel closed before a was queued again")
	default:
	}
	l.Queue("a", cause{name: "updated"}, count)
	select {
	case <-ch:
	default:
		t.Fatal("a's channel is open after a was queued again")
	}
	l.Queue("a", cause{name: "updated"}, count) // a second queueing: no second close (that would panic)
	l.Open("c")
	l.Done("c")
	if len(l.again) != 0 {
		t.Errorf("%d channels kept after Queue and Done, want none", len(l.again))
	}
}

// Reset drops the queued and waiting causes and hands over the kept ones
// once; the last Keep of a key wins.
func TestLedger_Reset_HandsOverTheKeptCausesOnce(t *testing.T) {
	var l Ledger[string, cause]
	l.Keep("a", cause{name: "manual"})
	l.Keep("a", cause{name: "channel"})
	l.Queue("b", cause{name: "created"}, count)
	l.Wait("c", cause{name: "retry"})
	kept := l.Reset()
	if len(kept) != 1 || kept["a"].name != "channel" {
		t.Errorf("Reset() = %+v, want a, by channel", kept)
	}
	if l.Queued("b") != nil || l.Waiting("c") != nil {
		t.Error("Reset kept the last run's queued or waiting causes")
	}
	if kept := l.Reset(); len(kept) != 0 {
		t.Errorf("a second Reset() = %+v, want none", kept)
	}
}

// Queued and Waiting are copies: changing one changes nothing held.
func TestLedger_QueuedAndWaitingAreCopies(t *testing.T) {
	var l Ledger[string, cause]
	l.Queue("a", cause{name: "created"}, count)
	l.Wait("a", cause{name: "retry"})
	l.Queued("a").name = "changed"
	l.Waiting("a").name = "changed"
	if l.Queued("a").name != "created" || l.Waiting("a").name != "retry" {
		t.Error("a change to a copy reached the ledger")
	}
	n := 0
	for k, c := range l.All() {
		n++
		if k != "a" || c.name != "created" {
			t.Errorf("All: %s %+v, want a created", k, c)
		}
	}
	if n != 1 {
		t.Errorf("All has %d causes, want 1", n)
	}
}
