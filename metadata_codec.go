package kctl

// The codec of the metadata of a resource's objects alone, which the
// server sends as metav1.PartialObjectMetadata: the informers and Owns of
// metadata.go read them so.

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// asMetadata, after a media type, asks the server for objects as
// metav1.PartialObjectMetadata, and lists as PartialObjectMetadataList.
const (
	asMetadata     = ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	asMetadataList = ";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
)

// newMetadataCodec is the codec of the metadata of res's objects;
// builtin: res is a k8s.io/api type's.
func newMetadataCodec(
	res Resource,
	builtin bool,
) codec[*metav1.PartialObjectMetadata] {
	type meta = metav1.PartialObjectMetadata
	return codec[*meta]{
		ops:        opsOf[meta](),
		res:        res,
		apiVersion: res.APIVersion(),
		builtin:    builtin,
		proto:      true,
		as:         asMetadata,
		asList:     asMetadataList,
		asKind:     metadataKind,
	}
}
