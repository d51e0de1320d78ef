package kctltest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/kctl-dev/kctl"
	"github.com/kctl-dev/kctl/internal/protowire"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// subresources are the subresources besides status that the in-memory
// server serves, by resource ("plural.group"): scale, as an
// autoscaling/v1 Scale of spec.replicas, and a Pod's eviction, which
// deletes it (no PodDisruptionBudget is consulted).
var subresources = map[string]string{
	"deployments.apps":       "scale",
	"replicasets.apps":       "scale",
	"statefulsets.apps":      "scale",
	"replicationcontrollers": "scale",
	"pods":                   "eviction",
}

// scaleResource is the store's view of autoscaling/v1 Scale, whose
// patches are applied as to any k8s.io/api type.
var scaleResource = &memResource{
	res: kctl.Resource{Group: "autoscaling", Version: "v1", Kind: "Scale", Plural: "scale", Namespaced: true},
	typ: reflect.TypeFor[autoscalingv1.Scale](),
}

// scale answers get, update and patch of a scale subresource: the Scale
// of the object's spec.replicas, status.replicas and selector; a write
// sets spec.replicas (and bumps the generation, as a change of spec
// does), with the Scale's resourceVersion, if any, as a precondition.
func (s *memServer) scale(w http.ResponseWriter, r *http.Request, c call) {
	if c.verb != "get" && c.verb != "update" && c.verb != "patch" {
		s.fail(w, notModelled(c.verb+" of the scale subresource"))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.fail(w, err)
		return
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	s.fake.mu.Lock()
	sc, err := s.scaleLocked(c, ct, body, r.URL.Query().Get("fieldManager"))
	s.changedLocked(c)
	s.fake.mu.Unlock()
	if err != nil {
		s.fail(w, err)
		return
	}
	s.answerTyped(w, r, c, http.StatusOK, sc, "autoscaling/v1", "Scale")
}

// scaleLocked returns the Scale of c's object after c's write, if any,
// of the Scale body (of content type ct). The caller holds s.fake.mu.
func (s *memServer) scaleLocked(c call, ct string, body []byte, manager string) (*autoscalingv1.Scale, error) {
	f := s.fakeOf(c.res)
	old, err := f.currentLocked(c.key(), "", false)
	if err != nil {
		return nil, err
	}
	sc, err := scaleOf(old)
	if err != nil || c.verb == "get" {
		return sc, err
	}
	next := &autoscalingv1.Scale{}
	switch {
	case c.verb == "update":
		if err := decodeTyped(ct, body, next); err != nil {
			return nil, err
		}
		if next.Name != c.name {
			return nil, apierrors.NewBadRequest("the name of the object (" + next.Name + ") does not match the name on the URL (" + c.name + ")")
		}
	case kctl.PatchType(ct) == kctl.ApplyPatch:
		return nil, notModelled("server-side apply of the scale subresource")
	default:
		cur, err := json.Marshal(sc)
		if err != nil {
			return nil, err
		}
		patched, err := s.fakeOf(scaleResource).patched(cur, kctl.PatchType(ct), body)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(patched)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, next); err != nil {
			return nil, apierrors.NewBadRequest("the patched Scale is not a Scale: " + err.Error())
		}
	}
	if err := s.setReplicasLocked(f, c, old, next, manager); err != nil {
		return nil, err
	}
	old, err = f.currentLocked(c.key(), "", false)
	if err != nil {
		return nil, err
	}
	return scaleOf(old)
}

// setReplicasLocked stores old with spec.replicas of next. The caller
// holds s.fake.mu.
func (s *memServer) setReplicasLocked(f *fakeResource, c call, old map[string]any, next *autoscalingv1.Scale, manager string) error {
	if next.Spec.Replicas < 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: "autoscaling", Kind: "Scale"}, c.name, field.ErrorList{
			field.Invalid(field.NewPath("spec", "replicas"), next.Spec.Replicas, "must be greater than or equal to 0")})
	}
	if _, err := f.currentLocked(c.key(), next.ResourceVersion, false); err != nil {
		return err
	}
	doc := clone(old)
	spec, _ := doc["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
		doc["spec"] = spec
	}
	if have, _ := spec["replicas"].(float64); have != float64(next.Spec.Replicas) || spec["replicas"] == nil {
		spec["replicas"] = float64(next.Spec.Replicas)
		meta := metadata(doc)
		gen, _ := meta["generation"].(float64)
		meta["generation"] = gen + 1
	}
	_, err := f.storeLocked(c.key(), old, doc, manager)
	return err
}

// scaleOf is the Scale of a stored object with spec.replicas: its status
// carries status.replicas and the selector as a string, as the API
// server's scale subresource has them.
func scaleOf(doc map[string]any) (*autoscalingv1.Scale, error) {
	var obj struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     struct {
			Replicas *int32          `json:"replicas"`
			Selector json.RawMessage `json:"selector"`
		} `json:"spec"`
		Status struct {
			Replicas int32 `json:"replicas"`
		} `json:"status"`
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, err
	}
	sel, err := selectorString(obj.Spec.Selector)
	if err != nil {
		return nil, err
	}
	m := obj.Metadata
	sc := &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, CreationTimestamp: m.CreationTimestamp},
		Status:     autoscalingv1.ScaleStatus{Replicas: obj.Status.Replicas, Selector: sel},
	}
	if obj.Spec.Replicas != nil {
		sc.Spec.Replicas = *obj.Spec.Replicas
	}
	return sc, nil
}

// selectorString is a selector as a Scale's status has it: a
// ReplicationController's map of labels, or a metav1.LabelSelector.
func selectorString(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var ls metav1.LabelSelector
	if json.Unmarshal(raw, &ls) == nil && (ls.MatchLabels != nil || ls.MatchExpressions != nil) {
		sel, err := metav1.LabelSelectorAsSelector(&ls)
		if err != nil {
			return "", err
		}
		return sel.String(), nil
	}
	var set map[string]string
	if err := json.Unmarshal(raw, &set); err != nil {
		return "", err
	}
	return labels.SelectorFromSet(set).String(), nil
}

// evict answers a Pod's eviction: a policy/v1 (or v1beta1) Eviction whose
// name is the Pod's deletes it with the Eviction's DeleteOptions, as the
// API server does when no PodDisruptionBudget forbids it (none is
// consulted), and answers 201 with a Status of Success.
func (s *memServer) evict(w http.ResponseWriter, r *http.Request, c call) {
	if c.verb != "create" {
		s.fail(w, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "pods/eviction"}, r.Method))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.fail(w, err)
		return
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var ev policyv1.Eviction
	if err := decodeTyped(ct, body, &ev); err != nil {
		s.fail(w, err)
		return
	}
	if ev.Name != c.name {
		s.fail(w, apierrors.NewBadRequest("name in URL does not match name in Eviction object"))
		return
	}
	var opts metav1.DeleteOptions
	if ev.DeleteOptions != nil {
		opts = *ev.DeleteOptions
	}
	s.fake.mu.Lock()
	_, _, err = s.deleteLocked(c.key(), c.res, opts)
	s.changedLocked(c)
	s.fake.mu.Unlock()
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
}

// decodeTyped decodes a request's body, JSON or protobuf, into obj, a
// k8s.io/api type's pointer.
func decodeTyped(contentType string, body []byte, obj protoMessage) error {
	if strings.HasPrefix(contentType, mediaProtobuf) {
		_, raw, err := protowire.Unwrap(body)
		if err == nil {
			err = obj.Unmarshal(raw)
		}
		if err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
		return nil
	}
	if err := json.Unmarshal(body, obj); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("the body is not a %T: %v", obj, err))
	}
	return nil
}

// answerTyped writes obj, a k8s.io/api type's pointer of apiVersion and
// kind, with code: in protobuf if r asks for it first, else in JSON.
func (s *memServer) answerTyped(w http.ResponseWriter, r *http.Request, c call, code int, obj protoMessage, apiVersion, kind string) {
	var out []byte
	var err error
	e := encodingOf(r, c.res, nil)
	if e.proto && !e.metadata {
		var pb []byte
		pb, err = obj.Marshal()
		out = protowire.Envelope(apiVersion, kind, pb)
	} else {
		out, err = json.Marshal(obj)
		if err == nil {
			out = withTypeMeta(out, apiVersion, kind)
		}
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", e.contentType())
	w.WriteHeader(code)
	w.Write(out)
}

// withTypeMeta is the JSON object b with apiVersion and kind first.
func withTypeMeta(b []byte, apiVersion, kind string) []byte {
	head := `{"kind":` + strconv.Quote(kind) + `,"apiVersion":` + strconv.Quote(apiVersion)
	if len(b) > 2 {
		head += ","
	}
	return append([]byte(head), b[1:]...)
}
