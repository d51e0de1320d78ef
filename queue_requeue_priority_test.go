package kctl

import "testing"

// Issue 25, item 5: a key keeps its priority when it is requeued
// (controller-runtime #3157).
func TestQueue_Requeue_KeepsItsPriority(t *testing.T) {
	runQueueScripts(t, []queueScript{
		{name: "a low key requeued after a delay comes back low", script: "low a; get a; after a 5ms; add b; done a; sleep 5ms; add c; get b; get c; get a"},
		{name: "a low key retried comes back low", script: "low a; get a; limited a; done a; sleep 10ms; add c; get c; get a"},
		{name: "a normal key requeued comes back normal", script: "add a; get a; after a 5ms; low b; done a; sleep 5ms; get a; get b"},
		{name: "a low requeue is raised by a normal add meanwhile", script: "low a; get a; after a 5ms; done a; add a; low b; get a; get b"},
		{name: "AddAfter of a low key that is not processing is normal", script: "low a; get a; done a; after a 5ms; low b; sleep 5ms; get a; get b"},
	})
}
