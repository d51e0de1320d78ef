package kctl

// The mechanics of a controller's sources besides its own type: the owner
// key of an owned object (ownerKeys), and the informer events a source
// passes on (live) or replays at each run (replay). The sources themselves
// are builder calls: Owns and Watches in controller_sources.go, their
// metadata-only forms in metadata.go, OwnsEveryOwner in owner.go and
// FromChannel in channel_source.go.

import (
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

// replay returns a function that hands every cached object to handle as an
// initial Added event: how a new run learns what happened while it was not running.
func replay[P any](inf *informer[P], handle func(event[P])) func() {
	return func() {
		all, _ := inf.List(ListOptions{}) // no selector: no error
		for _, obj := range all {
			handle(event[P]{Type: Added, Object: obj, Initial: true})
		}
	}
}
