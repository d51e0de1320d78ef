package webhook

// Typed admission webhooks, Validate and Default, served as
// AdmissionReview v1 by a Server (server.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/jsonpatch"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// AdmissionRequest is what the API server asks a validating webhook about
// one object of type T.
type AdmissionRequest[T any] struct {
	// Operation is "CREATE", "UPDATE", "DELETE" or "CONNECT" (the values
	// of admissionv1.Operation).
	Operation string
	// Object is the object as it would be stored; nil on Delete.
	Object *T
	// OldObject is the object stored now, on Update and Delete; else nil.
	OldObject *T
	// Namespace and Name are the object's; Name may be "" on a Create
	// with metadata.generateName.
	Namespace, Name string
	// SubResource is e.g. "status" for an UpdateStatus; "" for the object.
	SubResource string
	// DryRun says the request will not be persisted: a webhook with side
	// effects must not make them (and must declare sideEffects: NoneOnDryRun).
	DryRun bool
	// UserInfo is who sent the request.
	UserInfo kctl.UserInfo
	// UID identifies the request, e.g. in a log line.
	UID types.UID
}

// admissionReview is admission.k8s.io/v1's AdmissionReview, the fields
// kctl reads and writes. It does not import k8s.io/api/admission/v1:
// an API package's type registration links it into every program.
type admissionReview struct {
	metav1.TypeMeta `json:",inline"`
	Request         *admissionRequest  `json:"request,omitempty"`
	Response        *admissionResponse `json:"response,omitempty"`
}

type admissionRequest struct {
	UID         types.UID       `json:"uid"`
	Operation   string          `json:"operation"`
	Name        string          `json:"name,omitempty"`
	Namespace   string          `json:"namespace,omitempty"`
	SubResource string          `json:"subResource,omitempty"`
	UserInfo    kctl.UserInfo   `json:"userInfo"`
	Object      json.RawMessage `json:"object,omitempty"`
	OldObject   json.RawMessage `json:"oldObject,omitempty"`
	DryRun      *bool           `json:"dryRun,omitempty"`
}

type admissionResponse struct {
	UID       types.UID      `json:"uid"`
	Allowed   bool           `json:"allowed"`
	Result    *metav1.Status `json:"status,omitempty"`
	Patch     []byte         `json:"patch,omitempty"`
	PatchType *string        `json:"patchType,omitempty"`
	Warnings  []string       `json:"warnings,omitempty"`
}

// present says whether a review holds an object in raw (absent or null
// is none).
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// Validate serves validate as the validating webhook of T, at
// /validate-<group>-<version>-<kind> (see Server):
//
//	webhook.Validate(hooks, func(ctx context.Context, req webhook.AdmissionRequest[Widget]) ([]string, error) {
//		if req.Object != nil && req.Object.Spec.Size < 0 {
//			return nil, errors.New("spec.size must not be negative")
//		}
//		return nil, nil
//	})
//
// A nil error admits the object, with the warnings (kubectl prints each
// as "Warning: ..."). An error denies it: one that carries an API status
// (apierrors.NewInvalid, NewForbidden, ...) reaches the client with its
// code, reason and message as they are; any other with code 403 and its
// message unchanged (kubectl: `admission webhook "..." denied the request:
// <message>`). A panic denies with code 500 and is logged. An object that
// does not decode into T is denied with code 400 without calling validate.
//
// Register the operations to check in the
// ValidatingWebhookConfiguration's rules, and use admissionReviewVersions
// ["v1"]. A mistake (T not a resource, the path taken) is reported by
// Manager.Start.
func Validate[T any, PT kctl.Object[T]](
	srv *Server,
	validate func(ctx context.Context, req AdmissionRequest[T]) (warnings []string, err error),
) {
	res, err := kctl.ResourceOf[T]()
	if err != nil {
		srv.mgr.ReportMisuse(fmt.Errorf("kctl: Validate: %w", unprefixed(err)))
		return
	}
	path := webhookPath("validate", res)
	review := func(ctx context.Context, req *admissionRequest) *admissionResponse {
		typed, err := typedRequest[T](req)
		if err != nil {
			return deny(http.StatusBadRequest, err)
		}
		warnings, err := callValidate(ctx, validate, typed)
		if err != nil {
			resp := denied(err)
			resp.Warnings = warnings
			return resp
		}
		return &admissionResponse{Allowed: true, Warnings: warnings}
	}
	srv.handle(path, admissionHandler(review))
}

// callValidate calls validate, its panic an error.
func callValidate[T any](
	ctx context.Context,
	validate func(context.Context, AdmissionRequest[T]) ([]string, error),
	req AdmissionRequest[T],
) (warnings []string, err error) {
	defer webhookRecover(ctx, "validating webhook", &err)
	return validate(ctx, req)
}

// Default serves def as the defaulting (mutating) webhook of T, at
// /mutate-<group>-<version>-<kind> (see Server). On Create and
// Update, def gets the object as it would be stored and sets what it
// defaults:
//
//	webhook.Default(hooks, func(ctx context.Context, w *Widget) error {
//		if w.Spec.Size == 0 {
//			w.Spec.Size = 1
//		}
//		return nil
//	})
//
// kctl answers with the JSON patch of what def changed, applied to the
// object as received: it compares T encoded before and after def, so a
// field T does not know, at any depth, and a field def leaves alone stay
// byte for byte (internal/jsonpatch). In detail:
//
//   - A field def sets is set. Inside an object (a struct, a map value)
//     only the fields def changed are set, even where T's encoding had
//     omitted the object (omitempty, omitzero), so fields T lacks stay.
//   - A field def removes (a map key deleted, a pointer set to nil, a
//     value set to one T's encoding omits) is removed whole, with the
//     fields T lacks inside it.
//   - A list def changes is matched item by item. Items changed in place
//     keep the fields T lacks; items appended are added and items dropped
//     from the end removed. So is one run of items inserted or removed
//     anywhere, with the other items left as they were: kctl leaves alone
//     the items equal before and after at the start and at the end of the
//     list. Any other change of a list's length (say, an item inserted at
//     the front and another item changed) is applied by index between
//     those ends: the i-th item received takes def's i-th item there and
//     keeps the fields T lacks, whichever item def meant, and the last
//     items received are the ones added or removed. Items T encodes alike
//     are told apart only by their place.
//
// An error denies the request as Validate's does. Other operations are
// admitted without calling def.
//
// Register Create and Update in the MutatingWebhookConfiguration's rules,
// with admissionReviewVersions ["v1"] and reinvocationPolicy as you need.
// A mistake (T not a resource, the path taken) is reported by
// Manager.Start.
func Default[T any, PT kctl.Object[T]](
	srv *Server,
	def func(ctx context.Context, obj *T) error,
) {
	res, err := kctl.ResourceOf[T]()
	if err != nil {
		srv.mgr.ReportMisuse(fmt.Errorf("kctl: Default: %w", unprefixed(err)))
		return
	}
	path := webhookPath("mutate", res)
	review := func(ctx context.Context, req *admissionRequest) *admissionResponse {
		mutates := req.Operation == "CREATE" ||
			req.Operation == "UPDATE"
		if !mutates {
			return &admissionResponse{Allowed: true}
		}
		patch, denial := defaultPatch(ctx, def, req.Object)
		if denial != nil {
			return denial
		}
		resp := &admissionResponse{Allowed: true}
		if patch != nil {
			patchType := "JSONPatch"
			resp.Patch = patch
			resp.PatchType = &patchType
		}
		return resp
	}
	srv.handle(path, admissionHandler(review))
}

// defaultPatch decodes raw into a T, calls def on it and returns the
// patch of what def changed, or the answer that denies the request.
func defaultPatch[T any](
	ctx context.Context,
	def func(context.Context, *T) error,
	raw []byte,
) (patch []byte, denial *admissionResponse) {
	obj, err := decodeObject[T](raw, "object")
	if err != nil {
		return nil, deny(http.StatusBadRequest, err)
	}
	before, err := json.Marshal(obj)
	if err != nil {
		return nil, deny(http.StatusInternalServerError, err)
	}
	err = callDefault(ctx, def, obj)
	if err != nil {
		return nil, denied(err)
	}
	after, err := json.Marshal(obj)
	if err != nil {
		return nil, deny(http.StatusInternalServerError, err)
	}
	patch, err = jsonpatch.Diff(raw, before, after)
	if err != nil {
		return nil, deny(http.StatusInternalServerError, err)
	}
	return patch, nil
}

// callDefault calls def, its panic an error.
func callDefault[T any](
	ctx context.Context,
	def func(context.Context, *T) error,
	obj *T,
) (err error) {
	defer webhookRecover(ctx, "defaulting webhook", &err)
	return def(ctx, obj)
}

// typedRequest is req with its objects decoded into T.
func typedRequest[T any](req *admissionRequest) (AdmissionRequest[T], error) {
	typed := AdmissionRequest[T]{
		Operation:   req.Operation,
		Namespace:   req.Namespace,
		Name:        req.Name,
		SubResource: req.SubResource,
		DryRun:      req.DryRun != nil && *req.DryRun,
		UserInfo:    req.UserInfo,
		UID:         req.UID,
	}
	var err error
	if present(req.Object) {
		typed.Object, err = decodeObject[T](req.Object, "object")
		if err != nil {
			return typed, err
		}
	}
	if present(req.OldObject) {
		typed.OldObject, err = decodeObject[T](req.OldObject, "oldObject")
	}
	return typed, err
}

// admissionHandler serves AdmissionReview v1 with review, answering a
// review it cannot read with a 4xx (readReview).
func admissionHandler(
	review func(context.Context, *admissionRequest) *admissionResponse,
) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in admissionReview
		ok := readReview(w, r, "AdmissionReview", func(data []byte) error {
			return decodeAdmissionReview(data, &in)
		})
		if !ok {
			return
		}
		resp := review(r.Context(), in.Request)
		resp.UID = in.Request.UID
		out := admissionReview{
			TypeMeta: in.TypeMeta,
			Response: resp,
		}
		writeJSON(w, out)
	})
}

// decodeAdmissionReview decodes data into review and checks that it is
// a v1 request.
func decodeAdmissionReview(data []byte, review *admissionReview) error {
	err := json.Unmarshal(data, review)
	if err != nil {
		return err
	}
	if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
		return fmt.Errorf("it is %s %s, not admission.k8s.io/v1 AdmissionReview; "+
			"set admissionReviewVersions: [\"v1\"] in the webhook configuration",
			review.APIVersion, review.Kind)
	}
	if review.Request == nil {
		return errors.New("it has no request")
	}
	return nil
}

// denied is the answer that denies with err: its API status if it carries
// one, code 500 for a panic, else code 403 and its message.
func denied(err error) *admissionResponse {
	var status apierrors.APIStatus
	var panicked panicError
	if errors.As(err, &panicked) {
		return deny(http.StatusInternalServerError, err)
	}
	if errors.As(err, &status) {
		s := status.Status()
		return &admissionResponse{Result: &s}
	}
	return deny(http.StatusForbidden, err)
}

// deny is the answer that denies with code and err's message.
func deny(code int, err error) *admissionResponse {
	reason := metav1.StatusReasonForbidden
	switch code {
	case http.StatusBadRequest:
		reason = metav1.StatusReasonBadRequest
	case http.StatusInternalServerError:
		reason = metav1.StatusReasonInternalError
	}
	status := &metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    int32(code),
		Reason:  reason,
		Message: err.Error(),
	}
	return &admissionResponse{Result: status}
}
