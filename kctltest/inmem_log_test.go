package kctltest

import "testing"

// withResourceVersion rewrites the metadata's resourceVersion only (or
// adds it first), found by reading the JSON's structure: not a "metadata"
// or "resourceVersion" key of a nested object or inside a string, nor a
// quote escaped in a string.
func TestWithResourceVersion_RewritesTheTopLevelMetadataOnly(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","resourceVersion":"3"},"spec":{"x":1}}`,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","resourceVersion":"9"},"spec":{"x":1}}`},
		{`{"a":{"metadata":{"x":1}},"s":"\"metadata\":{","metadata":{"l":[{"a":"]}"}],"name":"a\"}"},"spec":{}}`,
			`{"a":{"metadata":{"x":1}},"s":"\"metadata\":{","metadata":{"resourceVersion":"9","l":[{"a":"]}"}],"name":"a\"}"},"spec":{}}`},
		{` { "metadata" : {"name":"b"} } `, ` { "metadata" : {"resourceVersion":"9","name":"b"} } `},
		{`{"kind":"NoMetadata"}`, `{"kind":"NoMetadata"}`},
		{`{"metadata":{"annotations":{"resourceVersion":"1"},"name":"a"}}`, `{"metadata":{"resourceVersion":"9","annotations":{"resourceVersion":"1"},"name":"a"}}`},
		{`{"metadata":{}}`, `{"metadata":{"resourceVersion":"9"}}`},
		{`{"metadata":{"generation":2,"resourceVersion":"12345"}}`, `{"metadata":{"generation":2,"resourceVersion":"9"}}`},
		{`{"metadata":"not an object"}`, `{"metadata":"not an object"}`},
	} {
		if got := string(withResourceVersion([]byte(tc.in), 9)); got != tc.want {
			t.Errorf("withResourceVersion(%s, 9) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
