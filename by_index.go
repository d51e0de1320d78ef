package kctl

// An informer's own indexes: AddIndex files its objects under the values
// a function returns, ByIndex reads them back. The store keeps them
// (store.go, internal/index) and a cached List's field selector reads
// them by name (store.fieldReqs).

import "fmt"

// ByIndex returns the objects that the index named index files under value
// (nil for an unknown index). The objects are shared: do not modify them.
func (i *Informer[T]) ByIndex(index, value string) []*T {
	return i.informer.ByIndex(index, value)
}

// AddIndex adds an index: fn returns the values an object is filed under,
// the same each time for the same object. Add indexes before Start, so they
// are not built under the lock from a full store.
//
//	pods.AddIndex("node", func(p *corev1.Pod) []string { return []string{p.Spec.NodeName} })
func (i *Informer[T]) AddIndex(name string, fn func(obj *T) []string) error {
	return i.informer.AddIndex(name, fn)
}

// ByIndex is Informer.ByIndex in the core.
func (i *informer[P]) ByIndex(index, value string) []P {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.store.byIndex(index, value)
}

// AddIndex is Informer.AddIndex in the core.
func (i *informer[P]) AddIndex(name string, fn func(obj P) []string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if err := i.store.addIndex(name, fn); err != nil {
		return fmt.Errorf("%w (%s)", err, i)
	}
	return nil
}

func (s *store[P]) addIndex(name string, fn func(obj P) []string) error {
	return s.indexes.Define(name, fn, s.each())
}

func (s *store[P]) byIndex(name, value string) []P {
	ix := s.indexes.Get(name)
	if ix == nil {
		return nil
	}
	keys := ix.Keys(value)
	out := make([]P, 0, len(keys))
	for k := range keys {
		out = append(out, s.objects[k.namespace][k.name].obj)
	}
	return out
}
