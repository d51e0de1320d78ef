package objcodec

// The wire form of one resource's objects: the media type a request asks
// for (the objects whole, or their metadata alone), and how a protobuf
// object is decoded: out of its envelope, each slice made once
// (internal/presize), around its managedFields if asked, and sharing the
// maps of objects decoded together when they stay read-only.

import (
	"cmp"

	"github.com/kctl-dev/kctl/internal/presize"
	"github.com/kctl-dev/kctl/internal/protowire"
)

// MetadataKind is the kind of an object's metadata sent alone
// (metav1.PartialObjectMetadata).
const MetadataKind = "PartialObjectMetadata"

// asMetadata, after a media type, asks the server for objects as
// metav1.PartialObjectMetadata, and lists as PartialObjectMetadataList.
const (
	asMetadata     = ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	asMetadataList = ";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
)

// Wire is how one resource's objects are asked for, and decoded from
// protobuf. Its zero value asks for them in their own form and decodes
// protobuf with the generated code alone. A Wire is a value: each copy
// of it shares maps (Begin) with the objects it decodes alone.
type Wire struct {
	// SkipManagedFields leaves managedFields out of protobuf objects (a
	// cache's default).
	SkipManagedFields bool
	// Reuse: objects decoded together (one list; a watch until its first
	// bookmark, which ends a watch-list's initial events) may share the
	// maps decoded from equal bytes (a container's resources), in memo.
	// Only for objects that stay read-only: an informer's.
	Reuse bool
	// as, when set, asks the server for the objects in another form, of
	// kind asKind, in protobuf whatever their own encoding: it follows
	// the media type of an object's request, asList that of a list
	// read's (Metadata).
	as     string
	asList string
	asKind string
	// sizes decodes protobuf with each slice made once, as long as its
	// elements (nil: the type has no slice to size, or no protobuf).
	sizes *presize.Plan
	// memo holds the maps shared since Begin (nil: none are).
	memo *presize.Memo
}

// WireOf is the Wire of obj's type (obj is a pointer to it); proto: its
// objects travel as protobuf (obj is a protowire.Message), which is then
// decoded with each slice made once.
func WireOf(obj any, proto bool) Wire {
	var w Wire
	if proto {
		w.sizes = presize.Of(obj)
	}
	return w
}

// Metadata is the Wire of a resource's objects asked for as their
// metadata alone: metav1.PartialObjectMetadata (of kind MetadataKind),
// in protobuf, whatever the resource's own encoding.
func Metadata() Wire {
	return Wire{
		as:     asMetadata,
		asList: asMetadataList,
		asKind: MetadataKind,
	}
}

// Accept is the Accept header of a request, of a list (a list read), or
// of a watch; proto: the objects travel as protobuf, else as JSON.
func (w *Wire) Accept(proto, watch, list bool) string {
	switch {
	case w.as != "" && list && !watch:
		return protowire.Media + w.asList
	case w.as != "":
		return protowire.Media + w.as
	case !proto:
		return MediaJSON
	case watch:
		return protowire.Media + ";stream=watch, " + MediaJSON
	}
	return protowire.Media + ", " + MediaJSON
}

// Object returns the object's own bytes in body, a protobuf object in
// its envelope, and an error if body is malformed or not of kind (or of
// the kind of the form asked for, Metadata's).
func (w *Wire) Object(body []byte, kind string) ([]byte, error) {
	return protowire.Object(body, cmp.Or(w.asKind, kind))
}

// Unmarshal decodes raw, a protobuf object's own bytes (no envelope),
// into obj, a pointer to a protowire.Message (else it is an error):
// slices sized once, maps shared since Begin; with SkipManagedFields,
// around managedFields (presize.Plan.UnmarshalObject). It may panic on
// malformed bytes, as generated code does.
func (w *Wire) Unmarshal(obj any, raw []byte) error {
	return w.sizes.UnmarshalObject(w.memo, obj, raw, w.SkipManagedFields)
}

// Begin starts a run of objects decoded together, one list or one
// watch's events: with Reuse, they share the maps decoded from equal
// bytes from now on, in this copy of w.
func (w *Wire) Begin() {
	if w.Reuse {
		w.memo = presize.NewMemo()
	}
}

// Event is told the type of each watch event before its object is
// decoded: a BOOKMARK (the first one ends a watch-list's initial events)
// ends the maps shared since Begin.
func (w *Wire) Event(typ string) {
	if typ == "BOOKMARK" {
		w.memo = nil
	}
}
