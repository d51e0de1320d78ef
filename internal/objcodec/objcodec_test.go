package objcodec

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kctl-dev/kctl/internal/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

func pod(name string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "7"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}

// A JSON body is the object as encoding/json writes it; a protobuf body
// is the object in the envelope the API server's own protobuf serializer
// reads, naming the apiVersion and kind asked for (protobuf itself does
// not carry them).
func TestEncode_JSONAndProtobufRoundTripAPod(t *testing.T) {
	want := pod("p")

	body, ct, err := Encode(want, false, "v1", "Pod")
	if err != nil || ct != "application/json" {
		t.Fatalf("Encode(pod, json) = _, %q, %v, want application/json", ct, err)
	}
	got := new(corev1.Pod)
	if err := json.Unmarshal(body, got); err != nil || got.Name != "p" || got.Kind != "Pod" || got.Spec.Containers[0].Image != "busybox" {
		t.Errorf("Encode(pod, json) decodes to %+v, %v", got, err)
	}

	body, ct, err = Encode(want, true, "v1", "Pod")
	if err != nil || ct != protowire.Media {
		t.Fatalf("Encode(pod, proto) = _, %q, %v, want %s", ct, err, protowire.Media)
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	obj, gvk, err := protobuf.NewSerializer(scheme, scheme).Decode(body, nil, nil)
	if err != nil {
		t.Fatalf("the API server's protobuf serializer rejects Encode's body: %v", err)
	}
	p, ok := obj.(*corev1.Pod)
	if gvk.GroupVersion().String() != "v1" || gvk.Kind != "Pod" || !ok {
		t.Fatalf("Encode(pod, proto) decodes as %v %T, want v1 Pod", gvk, obj)
	}
	if p.Namespace != "ns" || p.Name != "p" || p.ResourceVersion != "7" || p.Spec.Containers[0].Image != "busybox" {
		t.Errorf("Encode(pod, proto) decodes to %+v", p)
	}

	// the envelope names what the caller says, not what obj holds
	body, _, _ = Encode(&corev1.Pod{}, true, "example.com/v2", "Gadget")
	kind, _, err := protowire.Unwrap(body)
	if err != nil || string(kind) != "Gadget" {
		t.Errorf("Encode(empty pod, proto, Gadget) is of kind %q, %v", kind, err)
	}
}

// failingMessage is a protowire.Message that does not marshal.
type failingMessage struct{}

var errMarshal = errors.New("cannot marshal")

func (failingMessage) Marshal() ([]byte, error) { return nil, errMarshal }
func (failingMessage) Unmarshal([]byte) error   { return nil }

func TestEncode_PassesTheMarshalErrorOn(t *testing.T) {
	body, ct, err := Encode(failingMessage{}, true, "v1", "Pod")
	if !errors.Is(err, errMarshal) || body != nil || ct != "" {
		t.Errorf("Encode(failing, proto) = %q, %q, %v, want no body and %v", body, ct, err, errMarshal)
	}
	var unsupported *json.UnsupportedTypeError
	if _, _, err := Encode(make(chan int), false, "v1", "Pod"); !errors.As(err, &unsupported) {
		t.Errorf("Encode(chan, json) = %v, want a *json.UnsupportedTypeError", err)
	}
}

// decoder is List's item and done for *corev1.Pod: it records what each
// was given, and fails an item whose name starts with "bad" (an error
// naming it) as a codec whose type rejects the object would.
type decoder struct {
	raws  []string // item's raw bytes (JSON only)
	done  []string // names given to done
	proto []bool
}

func (d *decoder) item(raw []byte, proto bool) (*corev1.Pod, error) {
	d.proto = append(d.proto, proto)
	p := new(corev1.Pod)
	var err error
	if proto {
		err = p.Unmarshal(raw)
	} else {
		d.raws = append(d.raws, string(raw))
		err = json.Unmarshal(raw, p)
	}
	if err == nil && strings.HasPrefix(p.Name, "bad") {
		err = fmt.Errorf("pod %s: %w", p.Name, errMarshal)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (d *decoder) setDone(p *corev1.Pod) { d.done = append(d.done, p.Name) }

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

const (
	podA      = `{"metadata":{"name":"a"}}`
	podB      = `{"metadata":{"name":"b"}}`
	podBadTyp = `{"metadata":{"name":"x"},"spec":{"containers":5}}` // not a Pod: spec.containers is a number
)

// A JSON list is decoded in one pass when every item decodes: item is not
// called, done is called for each. Otherwise every item is decoded again
// by item; one that fails is left out and its error, as item returned it,
// is in skipped.
func TestList_JSON_OnePassElseItemByItem(t *testing.T) {
	list := func(items ...string) string {
		return `{"metadata":{"resourceVersion":"42","continue":"next"},"items":[` + strings.Join(items, ",") + `]}`
	}
	for _, tc := range []struct {
		what       string
		body       string
		wantItems  []string
		wantDone   []string // names given to done: the one pass only
		wantRaws   []string // bytes given to item: item by item only
		wantSkip   int
		wantErrMsg string // in the one skipped error
	}{
		{"every item decodes", list(podA, podB), []string{"a", "b"}, []string{"a", "b"}, nil, 0, ""},
		{"empty", list(), nil, nil, nil, 0, ""},
		{"an item not of the type", list(podA, podBadTyp, podB), []string{"a", "b"},
			nil, []string{podA, podBadTyp, podB}, 1, "cannot unmarshal number"},
		{"an item item rejects", list(podA, `{"metadata":{"name":"bad1"}}`), []string{"a", "bad1"},
			// the one pass decodes it, but item is only called item by item: here it accepts
			[]string{"a", "bad1"}, nil, 0, ""},
		{"a null item is given to item", list(podA, "null", podB), []string{"a", "", "b"},
			nil, []string{podA, "null", podB}, 0, ""},
		{"a null item, and one item rejects", list("null", `{"metadata":{"name":"bad2"}}`), []string{""},
			nil, []string{"null", `{"metadata":{"name":"bad2"}}`}, 1, "pod bad2: cannot marshal"},
	} {
		var d decoder
		items, meta, skipped, err := List("application/json", []byte(tc.body), d.item, d.setDone)
		if err != nil {
			t.Errorf("%s: List err = %v", tc.what, err)
			continue
		}
		if got := names(items); !slices.Equal(got, tc.wantItems) {
			t.Errorf("%s: items %q, want %q", tc.what, got, tc.wantItems)
		}
		if meta.ResourceVersion != "42" || meta.Continue != "next" {
			t.Errorf("%s: meta = %+v, want resourceVersion 42, continue next", tc.what, meta)
		}
		if !slices.Equal(d.done, tc.wantDone) || !slices.Equal(d.raws, tc.wantRaws) {
			t.Errorf("%s: done got %q, item got %q; want %q and %q", tc.what, d.done, d.raws, tc.wantDone, tc.wantRaws)
		}
		if len(skipped) != tc.wantSkip {
			t.Errorf("%s: skipped %v, want %d errors", tc.what, skipped, tc.wantSkip)
		} else if tc.wantSkip == 1 && !strings.Contains(skipped[0].Error(), tc.wantErrMsg) {
			t.Errorf("%s: skipped[0] = %v, want it to say %q", tc.what, skipped[0], tc.wantErrMsg)
		}
		for _, p := range items {
			if p == nil {
				t.Errorf("%s: a nil item in %v", tc.what, items)
			}
		}
	}
}

// The error of an item is reported as item returned it: errors.Is sees
// through to its cause, and the list goes on.
func TestList_JSON_SkippedIsItemsOwnError(t *testing.T) {
	var d decoder
	body := `{"items":[{"metadata":{"name":"bad"}},null]}`
	items, _, skipped, err := List("application/json", []byte(body), d.item, d.setDone)
	if err != nil || len(items) != 1 || len(skipped) != 1 || !errors.Is(skipped[0], errMarshal) {
		t.Errorf("List(bad, null) = %q, skipped %v, %v; want one item and an error wrapping %v", names(items), skipped, err, errMarshal)
	}
}

// err means the body is not a list at all; items and skipped are then
// nothing a caller should keep.
func TestList_JSON_NotAListIsAnError(t *testing.T) {
	for _, body := range []string{
		``,
		`{"items":[`,
		`[{"metadata":{"name":"a"}}]`,
		`{"items":{"a":1}}`,
		`404 page not found`,
	} {
		var d decoder
		_, _, _, err := List("application/json", []byte(body), d.item, d.setDone)
		if err == nil {
			t.Errorf("List(%q) err = nil, want an error", body)
		}
	}
}

// A protobuf list (enveloped) is walked item by item: item gets each
// item's own bytes with proto set, done is not called; an item that does
// not decode is skipped; a body without the envelope, or a ListMeta that
// does not decode, is an error.
func TestList_Protobuf(t *testing.T) {
	a, b := pod("a"), pod("b")
	pl := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "9", Continue: "c"}, Items: []corev1.Pod{*a, *b}}
	whole, err := pl.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	lm, _ := pl.ListMeta.Marshal()
	rawA, _ := a.Marshal()
	rawB, _ := b.Marshal()
	var byHand []byte
	byHand = protowire.AppendBytes(byHand, 1, lm)
	byHand = protowire.AppendBytes(byHand, 2, rawA)
	byHand = protowire.AppendBytes(byHand, 2, []byte{0x0a, 0x05, 0xff}) // metadata of 5 bytes, 1 there
	byHand = protowire.AppendBytes(byHand, 2, rawB)
	badMeta := protowire.AppendBytes(nil, 1, []byte{0x0a, 0x05})
	envelope := func(b []byte) []byte { return protowire.Envelope("v1", "PodList", b) }

	for _, tc := range []struct {
		what      string
		body      []byte
		wantItems []string
		wantSkip  int
		wantErr   bool
		wantRV    string
	}{
		{"a PodList", envelope(whole), []string{"a", "b"}, 0, false, "9"},
		{"an item that does not decode", envelope(byHand), []string{"a", "b"}, 1, false, "9"},
		{"no envelope", whole, nil, 0, true, ""},
		{"a ListMeta that does not decode", envelope(badMeta), nil, 0, true, ""},
	} {
		var d decoder
		items, meta, skipped, err := List(protowire.Media, tc.body, d.item, d.setDone)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: List err = %v, want error %v", tc.what, err, tc.wantErr)
		}
		if tc.wantErr {
			continue
		}
		if got := names(items); !slices.Equal(got, tc.wantItems) || len(skipped) != tc.wantSkip {
			t.Errorf("%s: items %q, skipped %v; want %q and %d skipped", tc.what, got, skipped, tc.wantItems, tc.wantSkip)
		}
		if meta.ResourceVersion != tc.wantRV || meta.Continue != "c" {
			t.Errorf("%s: meta = %+v, want resourceVersion %s, continue c", tc.what, meta, tc.wantRV)
		}
		if d.done != nil || slices.Contains(d.proto, false) {
			t.Errorf("%s: done got %q, item's proto %v; want no done and proto true", tc.what, d.done, d.proto)
		}
	}
}

func TestIsNil_OfPointers(t *testing.T) {
	if !IsNil[*corev1.Pod](nil) {
		t.Error("IsNil((*Pod)(nil)) = false")
	}
	if IsNil(&corev1.Pod{}) {
		t.Error("IsNil(&Pod{}) = true")
	}
	var zero corev1.Pod
	if IsNil(&zero) {
		t.Error("IsNil(&zero) = true")
	}
}
