package webhook

// Conversion webhooks for a CRD served at two versions (Convert), as
// ConversionReview v1 at /convert of a Server (server.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/kctl-dev/kctl"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// conversionReview is apiextensions.k8s.io/v1's ConversionReview (kctl
// does not depend on k8s.io/apiextensions-apiserver).
type conversionReview struct {
	metav1.TypeMeta `json:",inline"`
	Request         *conversionRequest  `json:"request,omitempty"`
	Response        *conversionResponse `json:"response,omitempty"`
}

type conversionRequest struct {
	UID               types.UID         `json:"uid"`
	DesiredAPIVersion string            `json:"desiredAPIVersion"`
	Objects           []json.RawMessage `json:"objects"`
}

type conversionResponse struct {
	UID              types.UID         `json:"uid"`
	ConvertedObjects []json.RawMessage `json:"convertedObjects"`
	Result           metav1.Status     `json:"result"`
}

// Convert serves the conversion between A and B, two Go types of one CRD
// at two versions, at the Server's /convert:
//
//	webhook.Convert(hooks,
//		func(src *v1.Widget, dst *v2.Widget) error { dst.Spec.Replicas = src.Spec.Size; return nil },
//		func(src *v2.Widget, dst *v1.Widget) error { dst.Spec.Size = src.Spec.Replicas; return nil })
//
// A and B must be declared (kctl.Declare) with the same Group and Kind and
// different Versions. Each function gets dst holding a copy of src's
// metadata and fills the rest; kctl sets its apiVersion and kind. An error
// fails the whole review, and the API server's request with it, with the
// error's message. A list is converted in one review, object by object.
//
// In the CRD, set spec.conversion.strategy: Webhook, with
// conversionReviewVersions ["v1"] and a clientConfig whose path is
// /convert. A mistake (a type not declared, the pair registered twice) is
// reported by Manager.Start.
func Convert[A, B any, PA kctl.Object[A], PB kctl.Object[B]](
	srv *Server,
	aToB func(src *A, dst *B) error,
	bToA func(src *B, dst *A) error,
) {
	ra, errA := kctl.ResourceOf[A]()
	rb, errB := kctl.ResourceOf[B]()
	err := convertible(ra, errA, rb, errB)
	if err != nil {
		srv.mgr.ReportMisuse(fmt.Errorf("kctl: Convert(%s, %s): %w",
			typeName[A](), typeName[B](), unprefixed(err)))
		return
	}
	c := conversion{a: ra.APIVersion(), b: rb.APIVersion()}
	c.convert = func(obj []byte, from, to string) ([]byte, error) {
		if from == c.a {
			return convertOne(obj, ra, rb, aToB)
		}
		return convertOne(obj, rb, ra, bToA)
	}
	key := ra.Group + "/" + ra.Kind
	srv.mu.Lock()
	_, taken := srv.conversions[key]
	if !taken {
		srv.conversions[key] = c
	}
	first := len(srv.conversions) == 1
	srv.mu.Unlock()
	if taken {
		srv.mgr.ReportMisuse(fmt.Errorf("kctl: Convert: the conversion of %s is "+
			"registered twice; kctl converts between two versions of a kind",
			key))
		return
	}
	if first {
		srv.handle("/convert", http.HandlerFunc(srv.serveConversion))
	}
}

// convertible says why ra and rb, with the errors of their ResourceOf,
// cannot be two versions of one kind.
func convertible(ra kctl.Resource, errA error, rb kctl.Resource, errB error) error {
	switch {
	case errA != nil:
		return errA
	case errB != nil:
		return errB
	case ra.Group != rb.Group || ra.Kind != rb.Kind:
		return fmt.Errorf("kctl: %s and %s are not one kind in one group; "+
			"declare both with the CRD's group and kind", ra, rb)
	case ra.Version == rb.Version:
		return fmt.Errorf("kctl: both are %s; declare each with its own version", ra)
	}
	return nil
}

// convertOne converts obj from the version of rs (type S) to that of rd
// (type D) with fn.
func convertOne[S, D any](
	obj []byte,
	rs, rd kctl.Resource,
	fn func(src *S, dst *D) error,
) ([]byte, error) {
	src, err := decodeObject[S](obj, "object")
	if err != nil {
		return nil, err
	}
	dst := new(D)
	copyMeta(src, dst)
	err = fn(src, dst)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(dst)
	if err != nil {
		return nil, err
	}
	return setTypeMeta(out, rd)
}

// copyMeta sets dst's metadata to a copy of src's (both embed
// metav1.ObjectMeta, as Object says).
func copyMeta(src, dst any) {
	s, sok := any(src).(metav1.ObjectMetaAccessor)
	d, dok := any(dst).(metav1.ObjectMetaAccessor)
	if !sok || !dok {
		return
	}
	sm, sok := s.GetObjectMeta().(*metav1.ObjectMeta)
	dm, dok := d.GetObjectMeta().(*metav1.ObjectMeta)
	if sok && dok {
		sm.DeepCopyInto(dm)
	}
}

// setTypeMeta sets apiVersion and kind of the encoded object obj to rd's.
func setTypeMeta(obj []byte, rd kctl.Resource) ([]byte, error) {
	var fields map[string]json.RawMessage
	err := json.Unmarshal(obj, &fields)
	if err != nil {
		return nil, err
	}
	apiVersion, _ := json.Marshal(rd.APIVersion())
	kind, _ := json.Marshal(rd.Kind)
	fields["apiVersion"] = apiVersion
	fields["kind"] = kind
	return json.Marshal(fields)
}

// serveConversion serves ConversionReview v1: every object of the request
// to its desiredAPIVersion.
func (srv *Server) serveConversion(w http.ResponseWriter, r *http.Request) {
	var in conversionReview
	ok := readReview(w, r, "ConversionReview", func(data []byte) error {
		return decodeConversionReview(data, &in)
	})
	if !ok {
		return
	}
	resp := &conversionResponse{UID: in.Request.UID}
	converted, err := srv.convertAll(r.Context(), in.Request)
	if err != nil {
		kctl.LoggerFrom(r.Context()).Error(err.Error(), "uid", in.Request.UID)
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
	} else {
		resp.ConvertedObjects = converted
		resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	}
	writeJSON(w, conversionReview{TypeMeta: in.TypeMeta, Response: resp})
}

// convertAll converts every object of req, or fails naming the first that
// does not convert.
func (srv *Server) convertAll(
	ctx context.Context,
	req *conversionRequest,
) (converted []json.RawMessage, err error) {
	defer webhookRecover(ctx, "conversion webhook", &err)
	group, _, _ := strings.Cut(req.DesiredAPIVersion, "/")
	converted = make([]json.RawMessage, 0, len(req.Objects))
	for i, obj := range req.Objects {
		var tm metav1.TypeMeta
		err = json.Unmarshal(obj, &tm)
		if err != nil {
			return nil, fmt.Errorf("kctl: object %d of the ConversionReview: %w", i, err)
		}
		srv.mu.Lock()
		c, found := srv.conversions[group+"/"+tm.Kind]
		srv.mu.Unlock()
		versions := []string{c.a, c.b}
		known := found && slices.Contains(versions, tm.APIVersion) &&
			slices.Contains(versions, req.DesiredAPIVersion)
		if !known {
			return nil, fmt.Errorf("kctl: no conversion of %s %s to %s is registered "+
				"(see Convert)", tm.APIVersion, tm.Kind, req.DesiredAPIVersion)
		}
		out := json.RawMessage(obj)
		if tm.APIVersion != req.DesiredAPIVersion {
			out, err = c.convert(obj, tm.APIVersion, req.DesiredAPIVersion)
		}
		if err != nil {
			return nil, fmt.Errorf("kctl: converting %s %s to %s: %w",
				tm.Kind, objectName(obj), req.DesiredAPIVersion, unprefixed(err))
		}
		converted = append(converted, out)
	}
	return converted, nil
}

// objectName is obj's "namespace/name", for an error message.
func objectName(obj []byte) string {
	var o struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	json.Unmarshal(obj, &o)
	return kctl.Key{Namespace: o.Metadata.Namespace, Name: o.Metadata.Name}.String()
}

// decodeConversionReview decodes data into review and checks that it is
// a v1 request.
func decodeConversionReview(data []byte, review *conversionReview) error {
	err := json.Unmarshal(data, review)
	if err != nil {
		return err
	}
	if review.APIVersion != "apiextensions.k8s.io/v1" || review.Kind != "ConversionReview" {
		return fmt.Errorf("it is %s %s, not apiextensions.k8s.io/v1 ConversionReview; "+
			"set conversionReviewVersions: [\"v1\"] in the CRD",
			review.APIVersion, review.Kind)
	}
	if review.Request == nil {
		return fmt.Errorf("it has no request")
	}
	return nil
}
