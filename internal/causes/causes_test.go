package causes

import "testing"

type cause struct {
	name   string
	merged int
}

func count(first *cause, later cause) { first.merged++ }

// The first cause since a key was taken wins; later ones merge into it.
func TestByKey_Add_FirstCauseWinsAndLaterOnesMerge(t *testing.T) {
	queued := ByKey[string, cause]{}
	queued.Add("a", cause{name: "created"}, count)
	queued.Add("a", cause{name: "updated"}, count)
	queued.Add("a", cause{name: "deleted"}, count)
	queued.Add("b", cause{name: "resync"}, count)
	if got := *queued["a"]; got.name != "created" || got.merged != 2 {
		t.Errorf("a: %+v, want created with 2 merged", got)
	}
	if got := *queued["b"]; got.name != "resync" || got.merged != 0 {
		t.Errorf("b: %+v, want resync with none merged", got)
	}
	queued.Take("a", ByKey[string, cause]{})
	queued.Add("a", cause{name: "updated"}, count)
	if got := *queued["a"]; got.name != "updated" || got.merged != 0 {
		t.Errorf("a after Take: %+v, want updated, the first since it was taken", got)
	}
}

// A queued cause wins over a wait's; Take drops both; nil if none.
func TestByKey_Take_QueuedCauseWinsOverTheWaitAndBothGo(t *testing.T) {
	queued := ByKey[string, cause]{}
	later := ByKey[string, cause]{}
	later.Add("a", cause{name: "retry"}, count)
	queued.Add("a", cause{name: "updated"}, count)
	later.Add("b", cause{name: "requeue-after"}, count)
	if got := queued.Take("a", later); got == nil || got.name != "updated" {
		t.Errorf("Take(a) = %+v, want updated (the event wins over the retry)", got)
	}
	if _, ok := later["a"]; ok {
		t.Error("Take(a) left a's retry in later")
	}
	if got := queued.Take("b", later); got == nil || got.name != "requeue-after" {
		t.Errorf("Take(b) = %+v, want requeue-after (the wait ended)", got)
	}
	if got := queued.Take("b", later); got != nil {
		t.Errorf("Take(b) again = %+v, want nil", got)
	}
	if len(queued) != 0 || len(later) != 0 {
		t.Errorf("after the Takes: %d queued, %d later; want none", len(queued), len(later))
	}
}

// Close closes the channel Open made, once, and ignores keys without one.
func TestAgain_CloseClosesTheOpenChannelOnce(t *testing.T) {
	again := Again[string]{}
	ch := again.Open("a")
	again.Close("b") // not worked on: nothing to close
	select {
	case <-ch:
		t.Fatal("a's channel closed before a was queued again")
	default:
	}
	again.Close("a")
	select {
	case <-ch:
	default:
		t.Fatal("a's channel is open after Close")
	}
	again.Close("a") // a second queueing: no second close (that would panic)
	if len(again) != 0 {
		t.Errorf("%d channels kept after Close, want none", len(again))
	}
}
