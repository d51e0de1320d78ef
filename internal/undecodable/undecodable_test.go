package undecodable

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

type key struct{ ns, name string }

func (k key) String() string { return k.ns + "/" + k.name }

// item is a list's undecodable item: a key, or none (name "").
type item struct{ key }

func (i item) Error() string { return "bad " + i.String() }

func keyOf(i item) (key, bool) { return i.key, i.name != "" }

func inNamespace(ns string) func(key) bool {
	return func(k key) bool { return ns == "" || k.ns == ns }
}

// Marking is logged once per object; clearing forgets it.
func TestSet_Mark_IsFirstOncePerObjectUntilCleared(t *testing.T) {
	s := New[key]()
	a := key{"x", "a"}
	if !s.Mark(a, errors.New("1")) || s.Mark(a, errors.New("2")) {
		t.Fatalf("Mark(a) twice: want first then not first")
	}
	if !s.Has(a) || s.Len() != 1 {
		t.Fatalf("after Mark: Has(a) = %v, Len() = %d; want true, 1", s.Has(a), s.Len())
	}
	s.Clear(a)
	if s.Has(a) || s.Len() != 0 || !s.Mark(a, errors.New("3")) {
		t.Fatalf("after Clear: Has(a) = %v, Len() = %d, or Mark(a) not first", s.Has(a), s.Len())
	}
}

// A relist marks what it lists, forgets the unlisted in its scope only, and
// with one item of no key forgets nothing and deletes nothing.
func TestRelist_SweepsTheScopeUnlessAnItemHasNoKey(t *testing.T) {
	s := New[key]()
	for _, k := range []key{{"x", "gone"}, {"x", "kept"}, {"y", "other"}} {
		s.Mark(k, errors.New("bad"))
	}
	if !Relist(s, []item{{key{"x", "kept"}}, {key{"x", "new"}}}, keyOf, inNamespace("x")) {
		t.Fatalf("Relist with keyed items only: sweep = false, want true")
	}
	want := []string{"x/kept", "x/new", "y/other"}
	if got := marked(s); !slices.Equal(got, want) {
		t.Errorf("after Relist of x: marked %q, want %q", got, want)
	}
	if Relist(s, []item{{key{"y", "more"}}, {}}, keyOf, inNamespace("")) {
		t.Errorf("Relist with an item of no key: sweep = true, want false")
	}
	want = []string{"x/kept", "x/new", "y/more", "y/other"}
	if got := marked(s); !slices.Equal(got, want) {
		t.Errorf("after Relist with an item of no key: marked %q, want %q (nothing forgotten)", got, want)
	}
}

func marked(s *Set[key]) []string {
	var out []string
	for k := range s.errs {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return out
}

// Since reports what stopped decoding and what decodes again (not what was
// deleted), and Log logs each once.
func TestSince_ReportsStoppedAndAgainButNotDeleted(t *testing.T) {
	s := New[key]()
	again, deleted, still, stopped := key{"x", "again"}, key{"x", "deleted"}, key{"x", "still"}, key{"x", "stopped"}
	for _, k := range []key{again, deleted, still} {
		s.Mark(k, errors.New("old"))
	}
	before := s.Snapshot()
	s.Clear(again)
	s.Clear(deleted)
	s.Mark(still, errors.New("still"))
	s.Mark(stopped, errors.New("stopped"))
	c := s.Since(before, func(k key) bool { return k != deleted })
	if len(c.Stopped) != 1 || c.Stopped[0].Error() != "stopped" || !slices.Equal(c.Again, []key{again}) {
		t.Errorf("Since = %+v, want Stopped [stopped], Again [x/again]", c)
	}
	var buf bytes.Buffer
	c.Log(slog.New(slog.NewTextHandler(&buf, nil)), "widgets")
	out := buf.String()
	if strings.Count(out, "could not decode") != 1 || strings.Count(out, "decodes an object again") != 1 ||
		!strings.Contains(out, "object=x/again") || !strings.Contains(out, "resource=widgets") {
		t.Errorf("Log wrote %q, want one line per change naming the resource and object", out)
	}
	// An object that stops decoding is a warning; one that decodes again, news.
	if !strings.Contains(out, `level=WARN msg="kctl: cache could not decode`) ||
		!strings.Contains(out, `level=INFO msg="kctl: cache decodes an object again"`) {
		t.Errorf("Log wrote %q, want Stopped at WARN and Again at INFO", out)
	}
}
