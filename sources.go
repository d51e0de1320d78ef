package kctl

// The mechanics of a controller's sources besides its own type: the owner
// key of an owned object (ownerKeys), and the informer events a source
// passes on (live) or replays at each run (replay). The sources themselves
// are builder calls: Owns and Watches in controller_sources.go, their
// metadata-only forms in metadata.go, OwnsEveryOwner in owner.go and
// FromChannel in channel_source.go.

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ownerKeys is the key of obj's controller owner if that owner is of res
// (same group and kind, any version), else none.
func ownerKeys(res Resource, obj metav1.Object) []Key {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != res.Kind {
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != res.Group {
		return nil
	}
	ns := obj.GetNamespace()
	if !res.Namespaced {
		ns = ""
	}
	return []Key{{Namespace: ns, Name: ref.Name}}
}

// live passes on the events of a running informer except those of its first
// list: each run's replay hands the controller every cached object anyway,
// and the first list's events may still be on their way when it does.
func live[P any](handle func(event[P])) func(event[P]) {
	return func(ev event[P]) {
		if !ev.Initial {
			handle(ev)
		}
	}
}

// replay returns a function that hands cached objects to handle as
// initial Added events: how a new run learns what happened while it was
// not running. Called with a nil match, it hands every one; else only
// those with a key (keys, the keys handle queues for it) that match
// takes, e.g. the keys of the ranges a shard member gained (handle then
// queues all of that object's keys).
func replay[P any](
	inf *informer[P],
	keys func(obj P) []Key,
	handle func(event[P]),
) replayFunc {
	return func(match func(Key) bool) {
		all, _ := inf.List(ListOptions{}) // no selector: no error
		for _, obj := range all {
			if match != nil && !slices.ContainsFunc(keys(obj), match) {
				continue
			}
			handle(event[P]{Type: Added, Object: obj, Initial: true})
		}
	}
}

// replayFunc is what replay returns: a nil match replays every object.
type replayFunc func(match func(Key) bool)

// ownKeys is the key of obj itself: what a controller queues for an
// object of its own type.
func ownKeys[P any](obj P) []Key {
	m := metaOf(obj)
	return []Key{{Namespace: m.GetNamespace(), Name: m.GetName()}}
}
