package kctl

import (
	"testing"
	"time"
)

func TestQueue_LowPriority(t *testing.T) {
	age := QueueOptions[string]{AgeLowPriorityAfter: 10 * time.Millisecond}
	runQueueScripts(t, []queueScript{
		{name: "normal keys go before low ones", script: "low a; low b; add c; get c; get a; get b"},
		{name: "keys queued before the first low add keep their order", script: "add a; add b; low c; add d; get a; get b; get d; get c"},
		{name: "low keys come out in their own order", script: "low b; low a; low c; get b; get a; get c"},
		{name: "an add raises a queued low key", script: "low a; low b; add c; add b; get c; get b; get a"},
		{name: "a low add does not lower a queued key", script: "add a; add b; low a; get a; get b"},
		{name: "a raised key is handed out once", script: "low a; add a; len 1; get a; done a; get -"},
		{name: "an add raises a low key added again while queued", script: "low a; low a; add a; add a; low b; add c; get a; get c; get b"},
		{name: "a low key ages into the back of the normal line", opts: age, script: "low a; add b; sleep 10ms; add c; get b; get a; get c"},
		{name: "a low key that aged comes before later normal keys", opts: age, script: "low a; sleep 20ms; add b; add c; get a; get b"},
		{name: "an aged key keeps its place when added again", opts: age, script: "add b; low a; sleep 10ms; add a; add c; get b; get a; get c"},
		{name: "a low re-add while processing stays low", script: "add a; get a; low a; add b; done a; add c; get b; get c; get a"},
		{name: "a normal re-add while processing wins over a low one", script: "add a; get a; low a; add a; add b; done a; add c; get b; get a; get c"},
		{name: "the default age is one minute", script: "low a; add b; sleep 59s; add c; get b; get c; get a; low d; sleep 1m; add e; get d"},
	})
}
