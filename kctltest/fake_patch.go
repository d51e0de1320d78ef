package kctltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/kctl-dev/kctl"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Patch applies a patch to the object named by obj's namespace and name, or
// to its status with opts.Subresource "status", and updates obj from the
// result, as kctl.Client.Patch does: a merge patch (kctl.MergePatch, RFC
// 7386), whose metadata.resourceVersion is a precondition; a JSON patch
// (kctl.JSONPatch, RFC 6902), whose test operations are preconditions; a
// strategic merge patch of a k8s.io/api type; or kctl.ApplyPatch, as Apply.
func (f *FakeClient[T]) Patch(ctx context.Context, obj *T, typ kctl.PatchType, data []byte, opts kctl.PatchOptions) error {
	m := any(obj).(metav1.Object)
	verb := "patch"
	if typ == kctl.ApplyPatch {
		verb = "apply"
	}
	if err := f.injected(verb, m.GetNamespace(), m.GetName()); err != nil {
		return err
	}
	b, err := f.patch(m.GetNamespace(), m.GetName(), typ, data, opts)
	if err != nil {
		return err
	}
	return into(b, obj)
}

// patch is Patch of the object namespace/name, returning the result.
func (f *fakeResource) patch(namespace, name string, typ kctl.PatchType, data []byte, opts kctl.PatchOptions) ([]byte, error) {
	if typ == kctl.ApplyPatch {
		return f.apply(namespace, name, data, opts)
	}
	key := f.key(namespace, name)
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	b, ok := f.store.objs[key]
	if !ok {
		return nil, f.notFound(name)
	}
	status := opts.Subresource == "status"
	if status && !f.hasStatus {
		return nil, f.notFound(name)
	}
	patched, err := f.patched(b, typ, data)
	if err != nil {
		return nil, err
	}
	patched = f.normal(patched)
	rv, _ := metadata(patched)["resourceVersion"].(string)
	old, err := f.currentLocked(key, rv, false)
	if err != nil {
		return nil, err
	}
	return f.storeLocked(key, old, f.merge(old, patched, status), "")
}

// Apply is server-side apply of obj as the field manager
// opts.FieldManager, as kctl.Client.Apply sends it (as JSON): see
// FakeClient for what is modelled.
func (f *FakeClient[T]) Apply(ctx context.Context, obj *T, opts kctl.PatchOptions) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return f.Patch(ctx, obj, kctl.ApplyPatch, data, opts)
}

// ApplyConfig is server-side apply of config, a client-go apply
// configuration or any value that marshals to the JSON of the fields it
// sets, as the field manager opts.FieldManager, as kctl.Client.ApplyConfig
// sends it; it returns the object as stored. config names the object;
// apiVersion and kind are T's when it leaves them out, and must be T's
// when it does not.
func (f *FakeClient[T]) ApplyConfig(ctx context.Context, config any, opts kctl.PatchOptions) (*T, error) {
	data, err := json.Marshal(config)
	if err != nil {
		return nil, fmt.Errorf("kctl: apply %s: encoding the apply configuration %T: %w", f.res, config, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil || doc == nil {
		return nil, fmt.Errorf("kctl: apply %s: the apply configuration %T is not a JSON object", f.res, config)
	}
	apiVersion, _ := doc["apiVersion"].(string)
	kind, _ := doc["kind"].(string)
	if apiVersion != "" && apiVersion != f.res.APIVersion() || kind != "" && kind != f.res.Kind {
		return nil, fmt.Errorf("kctl: apply %s: the apply configuration is of %s %s: apply it with a client of that type",
			f.res, apiVersion, kind)
	}
	meta := metadata(doc)
	namespace, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	if err := f.injected("apply", namespace, name); err != nil {
		return nil, err
	}
	b, err := f.patch(namespace, name, kctl.ApplyPatch, data, opts)
	if err != nil {
		return nil, err
	}
	obj := new(T)
	return obj, into(b, obj)
}

// patched returns the stored object b with a patch of type typ applied.
func (f *fakeResource) patched(b []byte, typ kctl.PatchType, data []byte) (map[string]any, error) {
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	switch typ {
	case kctl.MergePatch:
		var patch map[string]any
		if err := json.Unmarshal(data, &patch); err != nil {
			return nil, apierrors.NewBadRequest("the patch is not a JSON object: " + err.Error())
		}
		return mergePatch(doc, patch).(map[string]any), nil
	case kctl.JSONPatch:
		out, err := jsonPatch(doc, data)
		if err != nil {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", f.groupResource(), "", err.Error(), 0, false)
		}
		return out, nil
	case kctl.StrategicMergePatch:
		if !f.builtin {
			return nil, fmt.Errorf("kctl: patch %s: strategic merge patch works only for k8s.io/api types; "+
				"use a merge patch, a JSON patch or Apply", f.res.Kind)
		}
		var patch map[string]any
		if err := json.Unmarshal(data, &patch); err != nil {
			return nil, apierrors.NewBadRequest("the patch is not a JSON object: " + err.Error())
		}
		out, err := strategicMerge(doc, patch, f.typ)
		if err != nil {
			return nil, fmt.Errorf("kctltest: FakeClient[%s].Patch: %w: test it with Start", f.res.Kind, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("kctltest: FakeClient[%s].Patch models merge, JSON, strategic merge and apply patches, not %q: test it with Start",
		f.res.Kind, typ)
}

// jsonPatch applies an RFC 6902 JSON patch to doc. Patch answers its
// error as the API server does, 422 (Invalid).
func jsonPatch(doc map[string]any, data []byte) (map[string]any, error) {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		From  string          `json:"from"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(data, &ops); err != nil {
		return nil, apierrors.NewBadRequest("the JSON patch is not a list of operations: " + err.Error())
	}
	var root any = doc
	for i, op := range ops {
		var value any
		if len(op.Value) > 0 {
			json.Unmarshal(op.Value, &value) // it was valid JSON in the list
		}
		var err error
		switch op.Op {
		case "add":
			root, err = pointerSet(root, op.Path, value, true)
		case "replace":
			root, err = pointerSet(root, op.Path, value, false)
		case "remove":
			root, _, err = pointerRemove(root, op.Path)
		case "move":
			var v any
			root, v, err = pointerRemove(root, op.From)
			if err == nil {
				root, err = pointerSet(root, op.Path, v, true)
			}
		case "copy":
			var v any
			v, err = pointerGet(root, op.From)
			if err == nil {
				root, err = pointerSet(root, op.Path, cloneValue(v), true)
			}
		case "test":
			var v any
			v, err = pointerGet(root, op.Path)
			if err == nil && !reflect.DeepEqual(v, value) {
				err = fmt.Errorf("testing value %s failed", op.Path)
			}
		default:
			err = fmt.Errorf("unexpected kind: %s", op.Op)
		}
		if err != nil {
			return nil, fmt.Errorf("operation %d of the JSON patch: %w", i+1, err)
		}
	}
	out, ok := root.(map[string]any)
	if !ok {
		return nil, apierrors.NewBadRequest("the JSON patch does not leave an object")
	}
	return out, nil
}

// pointer splits an RFC 6901 JSON pointer into its tokens.
func pointer(path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("path %q does not start with /", path)
	}
	tokens := strings.Split(path[1:], "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

// pointerGet returns the value at path in root.
func pointerGet(root any, path string) (any, error) {
	tokens, err := pointer(path)
	if err != nil {
		return nil, err
	}
	v := root
	for _, t := range tokens {
		switch c := v.(type) {
		case map[string]any:
			next, ok := c[t]
			if !ok {
				return nil, fmt.Errorf("no value at %s", path)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return nil, fmt.Errorf("no value at %s", path)
			}
			v = c[i]
		default:
			return nil, fmt.Errorf("no value at %s", path)
		}
	}
	return v, nil
}

// pointerSet sets the value at path in root (add: in a list, inserts, and
// "-" appends; replace: the value must be there) and returns the new root.
func pointerSet(root any, path string, value any, add bool) (any, error) {
	tokens, err := pointer(path)
	if err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return value, nil
	}
	parentPath := path[:strings.LastIndex(path, "/")]
	parent, err := pointerGet(root, parentPath)
	if err != nil {
		return nil, err
	}
	last := tokens[len(tokens)-1]
	switch c := parent.(type) {
	case map[string]any:
		c[last] = value // the API server's replace of a missing key adds it too
		return root, nil
	case []any:
		i := len(c)
		if last != "-" {
			i, err = strconv.Atoi(last)
			if err != nil || i < 0 || i > len(c) || (!add && i == len(c)) {
				return nil, fmt.Errorf("no index %s in the list at %s", last, parentPath)
			}
		} else if !add {
			return nil, fmt.Errorf("replace operation does not apply: %s", path)
		}
		var list []any
		if add {
			list = slices.Insert(slices.Clone(c), i, value)
		} else {
			list = slices.Clone(c)
			list[i] = value
		}
		return pointerSet(root, parentPath, list, false)
	}
	return nil, fmt.Errorf("no object or list at %s", parentPath)
}

// pointerRemove removes the value at path in root and returns the new root
// and the value.
func pointerRemove(root any, path string) (any, any, error) {
	v, err := pointerGet(root, path)
	if err != nil {
		return nil, nil, err
	}
	i := strings.LastIndex(path, "/")
	parentPath := path[:max(i, 0)]
	parent, _ := pointerGet(root, parentPath) // v is there, so is it
	tokens, _ := pointer(path)
	last := tokens[len(tokens)-1]
	switch c := parent.(type) {
	case map[string]any:
		delete(c, last)
		return root, v, nil
	case []any:
		n, _ := strconv.Atoi(last)
		list := slices.Delete(slices.Clone(c), n, n+1)
		root, err = pointerSet(root, parentPath, list, false)
		return root, v, err
	}
	return nil, nil, fmt.Errorf("cannot remove %s", path)
}

// cloneValue deep-copies decoded JSON: maps and lists are copied, other
// values (strings, numbers, booleans, nil) are immutable.
func cloneValue(v any) any {
	switch c := v.(type) {
	case map[string]any:
		if c == nil {
			return c
		}
		out := make(map[string]any, len(c))
		for k, e := range c {
			out[k] = cloneValue(e)
		}
		return out
	case []any:
		if c == nil {
			return c
		}
		out := make([]any, len(c))
		for i, e := range c {
			out[i] = cloneValue(e)
		}
		return out
	}
	return v
}

// strategicMerge applies a strategic merge patch to doc, an object of Go
// type typ: as a merge patch, except that a list whose field is tagged
// patchStrategy:"merge" is merged, by its patchMergeKey for a list of
// objects, as a set for a list of values. Directives ($patch,
// $retainKeys, $setElementOrder, $deleteFromPrimitiveList) are not modelled.
func strategicMerge(doc, patch map[string]any, typ reflect.Type) (map[string]any, error) {
	for k, v := range patch {
		if strings.HasPrefix(k, "$") || strings.Contains(k, "/") {
			return nil, fmt.Errorf("the strategic merge patch directive %s is not modelled", k)
		}
		if v == nil {
			delete(doc, k)
			continue
		}
		field, ok := jsonField(typ, k)
		strategy := field.Tag.Get("patchStrategy")
		ft := derefType(field.Type)
		switch pv := v.(type) {
		case map[string]any:
			dv, isMap := doc[k].(map[string]any)
			if !isMap {
				dv = map[string]any{}
			}
			if ok && ft.Kind() == reflect.Struct {
				next, err := strategicMerge(dv, pv, ft)
				if err != nil {
					return nil, err
				}
				doc[k] = next
			} else {
				doc[k] = mergePatch(dv, pv)
			}
		case []any:
			dv, _ := doc[k].([]any)
			if !ok || !strings.Contains(strategy, "merge") {
				doc[k] = pv
				continue
			}
			next, err := mergeList(dv, pv, field.Tag.Get("patchMergeKey"), derefType(ft.Elem()))
			if err != nil {
				return nil, err
			}
			doc[k] = next
		default:
			doc[k] = v
		}
	}
	return doc, nil
}

// mergeList merges the list patch into have: objects with the same value
// of key are merged (as objects of Go type elem), others appended; values
// not in have are appended.
func mergeList(have, patch []any, key string, elem reflect.Type) ([]any, error) {
	out := slices.Clone(have)
	for _, p := range patch {
		pm, isObj := p.(map[string]any)
		if !isObj {
			if !slices.ContainsFunc(out, func(h any) bool { return reflect.DeepEqual(h, p) }) {
				out = append(out, p)
			}
			continue
		}
		if key == "" {
			return nil, errors.New("a merged list of objects without a patchMergeKey is not modelled")
		}
		i := slices.IndexFunc(out, func(h any) bool {
			hm, ok := h.(map[string]any)
			return ok && reflect.DeepEqual(hm[key], pm[key])
		})
		if i < 0 {
			out = append(out, pm)
			continue
		}
		hm, _ := out[i].(map[string]any)
		next, err := strategicMerge(hm, pm, elem)
		if err != nil {
			return nil, err
		}
		out[i] = next
	}
	return out, nil
}

// jsonField finds the field of struct type typ (or of its inlined structs)
// whose JSON name is name.
func jsonField(typ reflect.Type, name string) (reflect.StructField, bool) {
	if typ.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for f := range typ.Fields() {
		tag, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name {
			return f, true
		}
		if f.Anonymous && (tag == "" || strings.Contains(opts, "inline")) {
			if inner, ok := jsonField(derefType(f.Type), name); ok {
				return inner, true
			}
		}
	}
	return reflect.StructField{}, false
}

func derefType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
