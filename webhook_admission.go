package kctl

// An extra: typed admission webhooks, Validate and Default, served as
// AdmissionReview v1 by a WebhookServer (webhook_server.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/kctl-dev/kctl/internal/jsonpatch"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// AdmissionRequest is what the API server asks a validating webhook about
// one object of type T.
type AdmissionRequest[T any] struct {
	// Operation is admissionv1.Create, Update, Delete or Connect.
	Operation admissionv1.Operation
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
	UserInfo authenticationv1.UserInfo
	// UID identifies the request, e.g. in a log line.
	UID types.UID
}

// Validate serves validate as the validating webhook of T, at
// /validate-<group>-<version>-<kind> (see WebhookServer):
//
//	kctl.Validate(hooks, func(ctx context.Context, req kctl.AdmissionRequest[Widget]) ([]string, error) {
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
func Validate[T any, PT Object[T]](
	ws *WebhookServer,
	validate func(ctx context.Context, req AdmissionRequest[T]) (warnings []string, err error),
) {
	res, err := ResourceOf[T]()
	if err != nil {
		ws.m.misuse(fmt.Errorf("kctl: Validate: %w", unprefixed(err)))
		return
	}
	path := webhookPath("validate", res)
	review := func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
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
		return &admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings}
	}
	ws.handle(path, admissionHandler(review))
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
// /mutate-<group>-<version>-<kind> (see WebhookServer). On Create and
// Update, def gets the object as it would be stored and sets what it
// defaults:
//
//	kctl.Default(hooks, func(ctx context.Context, w *Widget) error {
//		if w.Spec.Size == 0 {
//			w.Spec.Size = 1
//		}
//		return nil
//	})
//
// kctl answers with the JSON patch of exactly what def changed: it
// compares T encoded before and after def, so fields T does not know, or
// that def leaves alone, are never touched (internal/jsonpatch). An error
// denies the request as Validate's does. Other operations are admitted
// without calling def.
//
// Register Create and Update in the MutatingWebhookConfiguration's rules,
// with admissionReviewVersions ["v1"] and reinvocationPolicy as you need.
// A mistake (T not a resource, the path taken) is reported by
// Manager.Start.
func Default[T any, PT Object[T]](
	ws *WebhookServer,
	def func(ctx context.Context, obj *T) error,
) {
	res, err := ResourceOf[T]()
	if err != nil {
		ws.m.misuse(fmt.Errorf("kctl: Default: %w", unprefixed(err)))
		return
	}
	path := webhookPath("mutate", res)
	review := func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		mutates := req.Operation == admissionv1.Create ||
			req.Operation == admissionv1.Update
		if !mutates {
			return &admissionv1.AdmissionResponse{Allowed: true}
		}
		patch, denial := defaultPatch(ctx, def, req.Object.Raw)
		if denial != nil {
			return denial
		}
		resp := &admissionv1.AdmissionResponse{Allowed: true}
		if patch != nil {
			patchType := admissionv1.PatchTypeJSONPatch
			resp.Patch = patch
			resp.PatchType = &patchType
		}
		return resp
	}
	ws.handle(path, admissionHandler(review))
}

// defaultPatch decodes raw into a T, calls def on it and returns the
// patch of what def changed, or the answer that denies the request.
func defaultPatch[T any](
	ctx context.Context,
	def func(context.Context, *T) error,
	raw []byte,
) (patch []byte, denial *admissionv1.AdmissionResponse) {
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
func typedRequest[T any](req *admissionv1.AdmissionRequest) (AdmissionRequest[T], error) {
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
	if len(req.Object.Raw) > 0 {
		typed.Object, err = decodeObject[T](req.Object.Raw, "object")
		if err != nil {
			return typed, err
		}
	}
	if len(req.OldObject.Raw) > 0 {
		typed.OldObject, err = decodeObject[T](req.OldObject.Raw, "oldObject")
	}
	return typed, err
}

// admissionHandler serves AdmissionReview v1 with review, answering a
// review it cannot read with a 4xx (readReview).
func admissionHandler(
	review func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse,
) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in admissionv1.AdmissionReview
		ok := readReview(w, r, "AdmissionReview", func(data []byte) error {
			return decodeAdmissionReview(data, &in)
		})
		if !ok {
			return
		}
		resp := review(r.Context(), in.Request)
		resp.UID = in.Request.UID
		out := admissionv1.AdmissionReview{
			TypeMeta: in.TypeMeta,
			Response: resp,
		}
		writeJSON(w, out)
	})
}

// decodeAdmissionReview decodes data into review and checks that it is
// a v1 request.
func decodeAdmissionReview(data []byte, review *admissionv1.AdmissionReview) error {
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
func denied(err error) *admissionv1.AdmissionResponse {
	var status apierrors.APIStatus
	var panicked panicError
	if errors.As(err, &panicked) {
		return deny(http.StatusInternalServerError, err)
	}
	if errors.As(err, &status) {
		s := status.Status()
		return &admissionv1.AdmissionResponse{Result: &s}
	}
	return deny(http.StatusForbidden, err)
}

// deny is the answer that denies with code and err's message.
func deny(code int, err error) *admissionv1.AdmissionResponse {
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
	return &admissionv1.AdmissionResponse{Result: status}
}
