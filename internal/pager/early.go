package pager

// A page's continue token before its objects are decoded.

import (
	"github.com/kctl-dev/kctl/internal/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Early hands early, if not nil, the ListMeta of body, a page of content
// type ct, as soon as the page is read and before its objects are decoded
// (time to ask for the next page): only a protobuf page's, whose ListMeta
// protowire.ListMeta reads alone; of any other page, or one whose
// ListMeta does not decode, nothing.
func Early(ct string, body []byte, early func(metav1.ListMeta)) {
	if early == nil || !protowire.IsProtobuf(ct) {
		return
	}
	peeked, ok := protowire.ListMeta(body)
	if ok {
		early(peeked)
	}
}
