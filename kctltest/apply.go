package kctltest

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Apply creates or updates manifests with server-side apply (field manager
// "kctltest", forced, strict field validation: an unknown or duplicate field
// fails), in order, and returns once each CustomResourceDefinition
// among them is Established, so its resource can be used at once. Each
// manifest is a YAML or JSON file path (string; several documents separated by
// "---" are fine), YAML or JSON bytes ([]byte), or a Go object with its
// apiVersion and kind set (TypeMeta). A namespaced object without a namespace
// goes to "default", as with kubectl. Any failure fails t.
//
//	env.Apply(t, "testdata/widget-crd.yaml")
//	env.Apply(t, &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ...})
//
// Bounds: 30 s for a CRD to be Established and served.
func (e *Env) Apply(t TB, manifests ...any) {
	t.Helper()
	for _, obj := range e.objects(t, manifests) {
		if err := e.apply(t.Context(), obj); err != nil {
			t.Fatalf("kctltest: Apply: %v", err)
		}
	}
}

// Delete deletes the objects of manifests (as Apply takes them), in reverse
// order, and returns once the API server has accepted each deletion; one that
// does not exist is fine. An object with finalizers is only marked for
// deletion: wait for it to go with WaitFor. Any failure fails t.
func (e *Env) Delete(t TB, manifests ...any) {
	t.Helper()
	objs := e.objects(t, manifests)
	for i := len(objs) - 1; i >= 0; i-- {
		if err := e.delete(t.Context(), objs[i]); err != nil {
			t.Fatalf("kctltest: Delete: %v", err)
		}
	}
}

// object is one manifest document, decoded.
type object struct {
	from       string // where it came from, for errors
	json       []byte
	apiVersion string
	kind       string
	name       string
	namespace  string
}

func (o object) String() string {
	return fmt.Sprintf("%s %s/%s (%s)", o.kind, o.namespace, o.name, o.from)
}

// objects decodes manifests, failing t on any error.
func (e *Env) objects(t TB, manifests []any) []object {
	t.Helper()
	var objs []object
	for i, m := range manifests {
		var docs [][]byte
		var from string
		var err error
		switch m := m.(type) {
		case string:
			from = m
			docs, err = readFile(m)
		case []byte:
			from = fmt.Sprintf("manifest %d (bytes)", i+1)
			docs, err = splitYAML(m)
		default:
			from = fmt.Sprintf("manifest %d (%T)", i+1, m)
			var b []byte
			b, err = json.Marshal(m)
			docs = [][]byte{b}
		}
		if err != nil {
			t.Fatalf("kctltest: reading %s: %v", from, err)
		}
		for _, doc := range docs {
			obj, err := decode(from, doc)
			if err != nil {
				t.Fatalf("kctltest: %v", err)
			}
			if obj.json != nil {
				objs = append(objs, obj)
			}
		}
	}
	return objs
}

func readFile(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return splitYAML(b)
}

// splitYAML returns the documents of a YAML or JSON stream.
func splitYAML(b []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, doc)
	}
}

// decode turns one document into an object; an empty document gives a zero object.
func decode(from string, doc []byte) (object, error) {
	js, err := utilyaml.ToJSON(doc)
	if err != nil {
		return object{}, fmt.Errorf("%s: %w", from, err)
	}
	if string(bytes.TrimSpace(js)) == "null" {
		return object{}, nil
	}
	var head struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return object{}, fmt.Errorf("%s: not a Kubernetes object: %w", from, err)
	}
	if head.APIVersion == "" || head.Kind == "" {
		return object{}, fmt.Errorf("%s: no apiVersion or kind: set them (for a Go object, its TypeMeta, "+
			`e.g. metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"})`, from)
	}
	if head.Metadata.Name == "" {
		return object{}, fmt.Errorf("%s: a %s without metadata.name: Apply needs a name", from, head.Kind)
	}
	return object{from: from, json: js, apiVersion: head.APIVersion, kind: head.Kind,
		name: head.Metadata.Name, namespace: head.Metadata.Namespace}, nil
}

// path returns obj's URL path, after finding its resource and checking
// that e may write it (mayWrite).
func (e *Env) path(ctx context.Context, obj object) (string, error) {
	r, err := e.discovery.resource(ctx, obj.apiVersion, obj.kind)
	if err != nil {
		return "", fmt.Errorf("%s: %w", obj, err)
	}
	if err := e.mayWrite(obj, r.Namespaced); err != nil {
		return "", err
	}
	p := "/apis/" + obj.apiVersion
	if !strings.Contains(obj.apiVersion, "/") {
		p = "/api/" + obj.apiVersion
	}
	if r.Namespaced {
		p += "/namespaces/" + url.PathEscape(cmp.Or(obj.namespace, "default"))
	}
	return p + "/" + r.Name + "/" + url.PathEscape(obj.name), nil
}

func (e *Env) apply(ctx context.Context, obj object) error {
	p, err := e.path(ctx, obj)
	if err != nil {
		return err
	}
	code, body, err := e.do(ctx, "PATCH", p+"?fieldManager=kctltest&force=true&fieldValidation=Strict", "application/apply-patch+yaml", string(obj.json))
	if err == nil && code != http.StatusOK && code != http.StatusCreated {
		err = applyError(code, body)
	}
	if err != nil {
		return fmt.Errorf("applying %s: %w", obj, err)
	}
	if obj.kind == "CustomResourceDefinition" && strings.HasPrefix(obj.apiVersion, "apiextensions.k8s.io/") {
		return e.waitEstablished(ctx, obj, p)
	}
	return nil
}

// notDeclared finds the field in the API server's answer to an apply of a
// field its schema lacks.
var notDeclared = regexp.MustCompile(`(\S+): field not declared in schema`)

// applyError says what an apply's failure answer means. An unknown field
// comes back as a bare 500 (server-side apply cannot build its typed
// patch), a duplicate one as a 400 (strict decoding).
func applyError(code int, body []byte) error {
	var st metav1.Status
	json.Unmarshal(body, &st) // a non-Status answer leaves Message empty
	msg := cmp.Or(st.Message, string(body))
	if m := notDeclared.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("the manifest has a field the schema does not declare, %s, and strict field validation "+
			"(server-side apply's, fieldValidation=Strict) refuses it: remove it, or add it to the schema "+
			"(for a CRD, its openAPIV3Schema); the API server answered %d: %s", m[1], code, msg)
	}
	if strings.Contains(msg, "strict decoding") {
		return fmt.Errorf("strict field validation (fieldValidation=Strict) refuses the manifest: "+
			"a field given twice, or one unknown: fix the manifest; the API server answered %d: %s", code, msg)
	}
	return fmt.Errorf("the API server answered %d: %s", code, body)
}

// waitEstablished waits up to 30 s until the CRD at path p is Established
// and discovery serves its resource.
func (e *Env) waitEstablished(ctx context.Context, obj object, p string) error {
	deadline := time.Now().Add(30 * time.Second)
	last := "no answer yet"
	for time.Now().Before(deadline) {
		code, body, err := e.do(ctx, "GET", p, "", "")
		var crd struct {
			Spec struct {
				Group    string `json:"group"`
				Names    struct{ Kind string }
				Versions []crdVersion `json:"versions"`
			} `json:"spec"`
			Status struct {
				Conditions []metav1.Condition `json:"conditions"`
			} `json:"status"`
		}
		switch {
		case err != nil:
			last = err.Error()
		case code != http.StatusOK:
			last = fmt.Sprintf("%d %s", code, body)
		case json.Unmarshal(body, &crd) != nil:
			last = string(body)
		default:
			last = fmt.Sprintf("conditions %+v", crd.Status.Conditions)
			if established(crd.Status.Conditions) && e.served(ctx, crd.Spec.Group, crd.Spec.Names.Kind, crd.Spec.Versions) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s is not Established and served after 30 s; last seen: %s", obj, last)
}

func established(conds []metav1.Condition) bool {
	for _, c := range conds {
		if c.Type == "Established" && c.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}

type crdVersion struct {
	Name   string `json:"name"`
	Served bool   `json:"served"`
}

// served tells whether discovery serves kind in every served version.
func (e *Env) served(ctx context.Context, group, kind string, versions []crdVersion) bool {
	for _, v := range versions {
		if !v.Served {
			continue
		}
		_, err := e.discovery.lookup(ctx, group+"/"+v.Name, kind, true)
		if err != nil {
			return false
		}
	}
	return true
}

func (e *Env) delete(ctx context.Context, obj object) error {
	p, err := e.path(ctx, obj)
	if errors.Is(err, errNotServed) {
		return nil // its CRD is gone, so is it
	}
	if err != nil {
		return err
	}
	code, body, err := e.do(ctx, "DELETE", p, "", "")
	if err == nil && code != http.StatusOK && code != http.StatusAccepted && code != http.StatusNotFound {
		err = fmt.Errorf("the API server answered %d: %s", code, body)
	}
	if err != nil {
		return fmt.Errorf("deleting %s: %w", obj, err)
	}
	return nil
}

var errNotServed = errors.New("not served")

// discovery finds the resource of a kind from the API server's discovery
// document of its group-version, cached; a miss reloads it (a CRD may have
// just been applied).
type discovery struct {
	env *Env
	mu  sync.Mutex
	gvs map[string][]metav1.APIResource // by group-version
}

// resource finds kind in apiVersion, waiting up to 10 s for it to be served.
func (d *discovery) resource(ctx context.Context, apiVersion, kind string) (metav1.APIResource, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := d.lookup(ctx, apiVersion, kind, false)
		if !errors.Is(err, errNotServed) || time.Now().After(deadline) {
			return r, err
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		r, err = d.lookup(ctx, apiVersion, kind, true)
		if !errors.Is(err, errNotServed) {
			return r, err
		}
	}
}

// lookup finds kind in apiVersion's cached discovery document, loading it
// first if it is not cached or reload is set.
func (d *discovery) lookup(ctx context.Context, apiVersion, kind string, reload bool) (metav1.APIResource, error) {
	d.mu.Lock()
	list, ok := d.gvs[apiVersion]
	d.mu.Unlock()
	if !ok || reload {
		var err error
		list, err = d.load(ctx, apiVersion)
		if err != nil {
			return metav1.APIResource{}, err
		}
	}
	var kinds []string
	for _, r := range list {
		if r.Kind == kind && !strings.Contains(r.Name, "/") {
			return r, nil
		}
		if !strings.Contains(r.Name, "/") {
			kinds = append(kinds, r.Kind)
		}
	}
	return metav1.APIResource{}, fmt.Errorf("%w: the API server serves no kind %s in %s (it serves %v): apply its CustomResourceDefinition first",
		errNotServed, kind, apiVersion, kinds)
}

func (d *discovery) load(ctx context.Context, apiVersion string) ([]metav1.APIResource, error) {
	p := "/apis/" + apiVersion
	if !strings.Contains(apiVersion, "/") {
		p = "/api/" + apiVersion
	}
	code, body, err := d.env.do(ctx, "GET", p, "", "")
	if err != nil {
		return nil, err
	}
	var list metav1.APIResourceList
	switch {
	case code == http.StatusNotFound:
		// not served (yet): an empty list
	case code != http.StatusOK:
		return nil, fmt.Errorf("discovery of %s: %d %s", apiVersion, code, body)
	default:
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, fmt.Errorf("discovery of %s: %w", apiVersion, err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gvs == nil {
		d.gvs = map[string][]metav1.APIResource{}
	}
	d.gvs[apiVersion] = list.APIResources
	return list.APIResources, nil
}
