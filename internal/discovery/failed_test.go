package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/apitype"
	"github.com/kctl-dev/kctl/internal/protowire"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var widget = Declared{
	Resource: apitype.Resource{Group: "example.com", Version: "v1", Kind: "Widget", Plural: "widgets", Namespaced: true},
	TypeName: "main.Widget",
}

var (
	getW          = Call{Verb: "get", What: "widgets.example.com/v1 ns/w", Method: http.MethodGet, Name: "w"}
	updateStatusW = Call{Verb: "update status of", What: "widgets.example.com/v1 ns/w", Sub: "status", Method: http.MethodPut, Name: "w"}
	applyW        = Call{Verb: "apply", What: "widgets.example.com/v1 ns/w", Method: http.MethodPatch, Name: "w"}
)

// answer is a failed answer of code: a Status in JSON, or in protobuf if
// ct says so, or body as it is if st is nil.
func answer(t *testing.T, code int, ct string, st *metav1.Status, body string, retryAfter int) *http.Response {
	t.Helper()
	if st != nil {
		st.Kind, st.APIVersion, st.Status, st.Code = "Status", "v1", metav1.StatusFailure, int32(code)
		var b []byte
		var err error
		if protowire.IsProtobuf(ct) {
			b, err = st.Marshal()
			b = protowire.Envelope("v1", "Status", b)
		} else {
			b, err = json.Marshal(st)
		}
		if err != nil {
			t.Fatal(err)
		}
		body = string(b)
	}
	h := http.Header{"Content-Type": {ct}}
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader(body))}
}

// server is a Fetch of one discovery document, counted.
type server struct {
	doc   map[string]metav1.APIResource // of example.com/v1; nil: not served
	err   error
	calls int
}

func (s *server) get(ctx context.Context, path string) (map[string]metav1.APIResource, error) {
	s.calls++
	if s.err != nil {
		return nil, s.err
	}
	if path != "/apis/example.com/v1" {
		return nil, nil
	}
	return s.doc, nil
}

func widgetsDoc(subs ...string) map[string]metav1.APIResource {
	doc := map[string]metav1.APIResource{"widgets": {Name: "widgets", Kind: "Widget", Namespaced: true}}
	for _, sub := range subs {
		doc["widgets/"+sub] = metav1.APIResource{Name: "widgets/" + sub, Kind: "Widget", Namespaced: true}
	}
	return doc
}

// Every answer but a 404 of a resource not served is the server's Status
// (or one made of the status code and the body), wrapped with the call's
// verb and what it names; a Forbidden one names the RBAC permission to
// grant. None asks for the discovery document.
func TestFailed_IsTheServersStatusWrappedWithTheCall(t *testing.T) {
	const jsonCT, pbCT = "application/json", protowire.Media
	namesW := &metav1.StatusDetails{Name: "w", Group: "example.com", Kind: "widgets"}
	for _, tc := range []struct {
		what string
		call Call
		resp func(t *testing.T) *http.Response
		is   func(error) bool
		want []string // words of the error, in order
	}{
		{"409 Status", getW, func(t *testing.T) *http.Response {
			return answer(t, 409, jsonCT, &metav1.Status{Reason: metav1.StatusReasonConflict, Message: "the object has been modified", Details: namesW}, "", 0)
		}, apierrors.IsConflict, []string{"kctl: get widgets.example.com/v1 ns/w: ", "the object has been modified"}},
		{"409 Status in protobuf", getW, func(t *testing.T) *http.Response {
			return answer(t, 409, pbCT, &metav1.Status{Reason: metav1.StatusReasonConflict, Message: "the object has been modified", Details: namesW}, "", 0)
		}, apierrors.IsConflict, []string{"kctl: get widgets.example.com/v1 ns/w: ", "the object has been modified"}},
		{"404 of the object", getW, func(t *testing.T) *http.Response {
			return answer(t, 404, jsonCT, &metav1.Status{Reason: metav1.StatusReasonNotFound, Message: `widgets.example.com "w" not found`, Details: namesW}, "", 0)
		}, apierrors.IsNotFound, []string{"kctl: get widgets.example.com/v1 ns/w: ", `widgets.example.com "w" not found`}},
		{"404 of the object, on a subresource", updateStatusW, func(t *testing.T) *http.Response {
			return answer(t, 404, jsonCT, &metav1.Status{Reason: metav1.StatusReasonNotFound, Message: `widgets.example.com "w" not found`, Details: namesW}, "", 0)
		}, apierrors.IsNotFound, []string{"kctl: update status of widgets.example.com/v1 ns/w: ", `"w" not found`}},
		{"500 without a Status", getW, func(t *testing.T) *http.Response {
			return answer(t, 500, "text/plain", nil, "etcdserver: leader changed", 3)
		}, func(err error) bool {
			d, ok := apierrors.SuggestsClientDelay(err)
			return apierrors.IsInternalError(err) && ok && d == 3
		}, []string{"kctl: get widgets.example.com/v1 ns/w: ", "etcdserver: leader changed", "(get widgets.example.com w)"}},
		{"403 Status", updateStatusW, func(t *testing.T) *http.Response {
			msg := `widgets.example.com "w" is forbidden: User "bob" cannot update resource "widgets/status"`
			return answer(t, 403, jsonCT, &metav1.Status{Reason: metav1.StatusReasonForbidden, Message: msg, Details: namesW}, "", 0)
		}, apierrors.IsForbidden, []string{"kctl: update status of widgets.example.com/v1 ns/w: ", `User "bob" cannot`,
			": grant this identity RBAC permission to update widgets/status"}},
		{"403 without a Status", applyW, func(t *testing.T) *http.Response {
			return answer(t, 403, "text/plain", nil, "forbidden by a proxy", 0)
		}, apierrors.IsForbidden, []string{"kctl: apply widgets.example.com/v1 ns/w: ", "forbidden by a proxy",
			": grant this identity RBAC permission to patch widgets"}},
	} {
		s := &server{doc: widgetsDoc()}
		var d Cache
		err := d.Failed(t.Context(), s.get, widget, tc.call, tc.resp(t))
		var se *apierrors.StatusError
		var ns *NotServed
		if !errors.As(err, &se) || errors.As(err, &ns) || !tc.is(err) {
			t.Errorf("%s: Failed = %v (%T), want a wrapped *StatusError of the right reason, not a *NotServed", tc.what, err, err)
			continue
		}
		if msg := err.Error(); !inOrder(msg, tc.want) {
			t.Errorf("%s: Failed = %q, want it to say %q", tc.what, msg, tc.want)
		}
		if s.calls != 0 || d.docs["example.com/v1"] != nil {
			t.Errorf("%s: Failed asked for discovery %d times, or touched its cache", tc.what, s.calls)
		}
	}
}

// inOrder reports whether msg holds each of words, one after the other.
func inOrder(msg string, words []string) bool {
	for _, w := range words {
		i := strings.Index(msg, w)
		if i < 0 {
			return false
		}
		msg = msg[i+len(w):]
	}
	return true
}

// A 404 whose Status names no object (a route the server does not have,
// as its plain "404 page not found" or a Status with empty details) is a
// *NotServed saying what to do, holding the NotFound; the group version's
// document is marked stale, and asked for only for a subresource call.
func TestFailed_404OfAResourceNotServed(t *testing.T) {
	routeMissing := func(t *testing.T) *http.Response {
		return answer(t, 404, "application/json", &metav1.Status{Reason: metav1.StatusReasonNotFound,
			Message: "the server could not find the requested resource", Details: &metav1.StatusDetails{}}, "", 0)
	}
	pageNotFound := func(t *testing.T) *http.Response {
		return answer(t, 404, "text/plain; charset=utf-8", nil, "404 page not found", 0)
	}
	const crd = "kctl: widgets.example.com/v1 is not installed on the API server: apply its CRD"
	pods := Declared{Resource: apitype.Resource{Version: "v1", Kind: "Pod", Plural: "pods", Namespaced: true}, Builtin: true, TypeName: "v1.Pod"}
	getPod := Call{Verb: "get", What: "pods/v1 ns/p", Method: http.MethodGet, Name: "p"}
	for _, tc := range []struct {
		what      string
		res       Declared
		call      Call
		resp      func(t *testing.T) *http.Response
		srv       server
		want      string
		wantCalls int
	}{
		{"a route the server lacks", widget, getW, routeMissing, server{doc: widgetsDoc()}, crd, 0},
		{"404 page not found", widget, getW, pageNotFound, server{doc: widgetsDoc()}, crd, 0},
		{"a built-in type", pods, getPod, pageNotFound, server{}, "kctl: pods/v1 is not served by the API server: " +
			"the server is too old or too new for it, or its API group is disabled", 0},
		{"a subresource the server does not serve", widget, updateStatusW, routeMissing, server{doc: widgetsDoc("scale")},
			"kctl: update status of widgets.example.com/v1 ns/w: the server serves no status subresource of widgets: " +
				"add `subresources: {status: {}}` to version v1 of their CRD", 1},
		{"a subresource the server serves", widget, updateStatusW, routeMissing, server{doc: widgetsDoc("status")}, crd, 1},
		{"a subresource of a group version not served", widget, updateStatusW, pageNotFound, server{},
			crd + " (the server serves no group version example.com/v1: check Group and Version in kctl.Declare[main.Widget])", 1},
		{"a subresource, discovery failing", widget, updateStatusW, routeMissing, server{err: errors.New("connection refused")}, crd, 1},
	} {
		var d Cache
		err := d.Failed(t.Context(), tc.srv.get, tc.res, tc.call, tc.resp(t))
		var ns *NotServed
		if !errors.As(err, &ns) || err.Error() != tc.want {
			t.Errorf("%s: Failed = %v, want a *NotServed %q", tc.what, err, tc.want)
			continue
		}
		if tc.want == crd && !apierrors.IsNotFound(ns.Status) {
			t.Errorf("%s: Failed's *NotServed holds %v, want the NotFound", tc.what, ns.Status)
		}
		if tc.srv.calls != tc.wantCalls {
			t.Errorf("%s: Failed asked for discovery %d times, want %d", tc.what, tc.srv.calls, tc.wantCalls)
		}
		if s := d.docs[tc.res.APIVersion()]; tc.wantCalls == 0 && (s == nil || !s.stale) {
			t.Errorf("%s: Failed left the document of %s not stale", tc.what, tc.res.APIVersion())
		}
	}
}

// A subresource 404 is checked against the cached document while it is
// fresh; the 404 marks it stale, so a second later the server is asked
// again and its new answer (the subresource was removed) names the fix.
func TestFailed_404OfASubresource_AsksAgainAfterRefresh(t *testing.T) {
	t0 := time.Unix(1000, 0)
	now := t0
	d := Cache{Now: func() time.Time { return now }}
	s := &server{doc: widgetsDoc("status")}
	if err := d.Check(t.Context(), s.get, widget, updateStatusW); err != nil {
		t.Fatalf("Check = %v", err)
	}
	s.doc = widgetsDoc() // the CRD drops its status subresource
	notFound := func() *http.Response {
		return answer(t, 404, "text/plain", nil, "404 page not found", 0)
	}
	var ns *NotServed

	now = t0.Add(Refresh / 2)
	err := d.Failed(t.Context(), s.get, widget, updateStatusW, notFound())
	if !errors.As(err, &ns) || !strings.Contains(err.Error(), "is not installed") || s.calls != 1 {
		t.Errorf("Failed within Refresh = %v after %d requests, want not installed after 1", err, s.calls)
	}

	now = t0.Add(Refresh)
	err = d.Failed(t.Context(), s.get, widget, updateStatusW, notFound())
	if !errors.As(err, &ns) || !strings.Contains(err.Error(), "serves no status subresource") || s.calls != 2 {
		t.Errorf("Failed after Refresh = %v after %d requests, want no status subresource after 2", err, s.calls)
	}
}
