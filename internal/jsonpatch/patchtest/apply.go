// Package patchtest applies a JSON Patch (RFC 6902) for tests of the patches
// kctl writes: add, remove and replace, strictly (a path that does not exist
// is an error, as the API server's applier makes it). Test code only: no
// program imports it, so kctl's go.mod names no JSON Patch library.
package patchtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

type op struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value"`
}

// Apply returns doc with patch applied, or an error naming the operation
// that does not apply.
func Apply(doc, patch []byte) ([]byte, error) {
	var ops []op
	if err := json.Unmarshal(patch, &ops); err != nil {
		return nil, fmt.Errorf("patchtest: decoding the patch: %w", err)
	}
	root, err := decode(doc)
	if err != nil {
		return nil, fmt.Errorf("patchtest: decoding the document: %w", err)
	}
	for i, o := range ops {
		root, err = applyOp(root, o)
		if err != nil {
			return nil, fmt.Errorf("patchtest: operation %d (%s %s): %w", i, o.Op, o.Path, err)
		}
	}
	return json.Marshal(root)
}

func decode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

func applyOp(root any, o op) (any, error) {
	var value any
	if o.Op == "add" || o.Op == "replace" {
		if o.Value == nil {
			return nil, fmt.Errorf("no value")
		}
		v, err := decode(o.Value)
		if err != nil {
			return nil, err
		}
		value = v
	} else if o.Op != "remove" {
		return nil, fmt.Errorf("unsupported operation")
	}
	if o.Path == "" {
		if o.Op == "remove" {
			return nil, fmt.Errorf("cannot remove the whole document")
		}
		return value, nil
	}
	if !strings.HasPrefix(o.Path, "/") {
		return nil, fmt.Errorf("path does not start with /")
	}
	tokens := strings.Split(o.Path[1:], "/")
	for i, t := range tokens {
		t = strings.ReplaceAll(t, "~1", "/")
		tokens[i] = strings.ReplaceAll(t, "~0", "~")
	}
	return change(root, tokens, o.Op, value)
}

// change applies the operation at tokens under node and returns the node
// as changed (a slice may be a new one).
func change(node any, tokens []string, kind string, value any) (any, error) {
	last := len(tokens) == 1
	key := tokens[0]
	switch n := node.(type) {
	case map[string]any:
		child, ok := n[key]
		if !last {
			if !ok {
				return nil, fmt.Errorf("no member %q", key)
			}
			changed, err := change(child, tokens[1:], kind, value)
			if err != nil {
				return nil, err
			}
			n[key] = changed
			return n, nil
		}
		if !ok && kind != "add" {
			return nil, fmt.Errorf("no member %q to %s", key, kind)
		}
		if kind == "remove" {
			delete(n, key)
		} else {
			n[key] = value
		}
		return n, nil
	case []any:
		if last && kind == "add" && key == "-" {
			return append(n, value), nil
		}
		i, err := strconv.Atoi(key)
		if err != nil || i < 0 || i > len(n) || (i == len(n) && !(last && kind == "add")) {
			return nil, fmt.Errorf("index %q out of range of %d items", key, len(n))
		}
		if !last {
			changed, err := change(n[i], tokens[1:], kind, value)
			if err != nil {
				return nil, err
			}
			n[i] = changed
			return n, nil
		}
		switch kind {
		case "add":
			n = append(n, nil)
			copy(n[i+1:], n[i:])
			n[i] = value
		case "remove":
			n = append(n[:i], n[i+1:]...)
		default:
			n[i] = value
		}
		return n, nil
	}
	return nil, fmt.Errorf("%q is inside neither an object nor a list", key)
}
