package transport

// A failed answer made an error: the server's metav1.Status, decoded from
// JSON or protobuf, as an *apierrors.StatusError, and the RBAC permission a
// Forbidden call lacks; and the metadata of an object that failed to
// decode.

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/kctl-dev/kctl/internal/protowire"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DecodeStatus returns the metav1.Status in a response body of
// Content-Type contentType (never nil), and whether the body is one.
func DecodeStatus(contentType string, body []byte) (*metav1.Status, bool) {
	if protowire.IsProtobuf(contentType) {
		return protowire.Status(body)
	}
	st := new(metav1.Status)
	err := json.Unmarshal(body, st)
	return st, err == nil && st.Kind == "Status"
}

// ObjectMeta decodes the metadata alone of raw, an object's own bytes (no
// envelope), protobuf if proto, else JSON, as a decoder would: so that an
// object that fails to decode can still be named. It is zero if even the
// metadata does not decode.
func ObjectMeta(raw []byte, proto bool) metav1.ObjectMeta {
	var m metav1.ObjectMeta
	var err error
	if proto {
		m, err = protowire.ObjectMeta(raw)
	} else {
		var o struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		err = json.Unmarshal(raw, &o)
		m = o.Metadata
	}
	if err != nil {
		return metav1.ObjectMeta{}
	}
	return m
}

// StatusError is the error of resp, a failed answer to method whose body
// is body: the server's Status if the body is one, else one made of the
// status code and the body's start (Retry-After, gr and name in its
// details). namesObject: the body is a Status that names an object, as
// a NotFound of an object does, and that of a missing route does not.
func StatusError(
	resp *http.Response,
	body []byte,
	method string,
	gr schema.GroupResource,
	name string,
) (se *apierrors.StatusError, namesObject bool) {
	ct := resp.Header.Get("Content-Type")
	st, ok := DecodeStatus(ct, body)
	se = &apierrors.StatusError{ErrStatus: *st}
	if !ok {
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		text := string(body[:min(len(body), 512)])
		se = apierrors.NewGenericServerResponse(
			resp.StatusCode, method, gr, name, text, ra, true)
	}
	d := st.Details
	namesObject = ok && d != nil && (d.Name != "" || d.Kind != "")
	return se, namesObject
}

// rbacVerbs are the RBAC verbs of kctl's verbs that are not one.
var rbacVerbs = map[string]string{
	"update status of": "update",
	"apply":            "patch",
	"delete all of":    "deletecollection",
}

// Permission is the RBAC permission a call lacks that the server
// forbade: kctl's verb ("update status of") as RBAC's, and the resource
// plural, with its subresource sub if any, e.g. "update widgets/status".
func Permission(verb, plural, sub string) string {
	rbac := cmp.Or(rbacVerbs[verb], verb)
	resource := strings.TrimSuffix(plural+"/"+sub, "/")
	return rbac + " " + resource
}
