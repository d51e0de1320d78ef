package kctl

// Objects that stop decoding into T (a CRD field that changed type, a bad
// write to a field the schema does not check). The codec still decodes their
// metadata (decodeError), so the informer knows their key: the store keeps
// their last good copy and marks them (store.bad) until they decode again or
// are deleted, a relist never takes them for deleted, and each is logged once
// and counted (Undecodable, kctl_cache_undecodable_objects).

// Undecodable returns the number of objects in scope that exist on the
// server but whose current state does not decode into T: a CRD field that
// changed type, a bad write to a field the schema does not check. Get, List
// and the handlers see the last good copy of each, if it ever decoded, until
// it decodes again (an Updated event) or is deleted (a Deleted event with
// that copy); a relist never takes one for deleted. Each is logged once. For
// the metrics page (kctl_cache_undecodable_objects).
func (i *Informer[T]) Undecodable() int {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return len(i.store.bad)
}

// applyUndecodable applies a watch event whose object does not decode into
// T but whose key is known. A delete removes the object's last good copy,
// if any, and tells the handlers (Deleted, with that copy); an add or update
// keeps it and marks the object undecodable, logged once per object.
func (i *Informer[T]) applyUndecodable(w *watchState, typ string, bad *decodeError) {
	k := objKey{bad.Namespace, bad.Name}
	first := false
	i.mu.Lock()
	if typ == "DELETED" {
		last, ok := i.store.get(k.namespace, k.name)
		i.store.remove(k.namespace, k.name)
		if ok {
			i.emitLocked(Event[T]{Type: Deleted, Object: last})
		}
	} else {
		first = i.store.markBad(k, bad)
	}
	if bad.ResourceVersion != "" {
		w.rv = bad.ResourceVersion
	}
	i.notifyLocked()
	i.mu.Unlock()
	if first {
		i.logUndecodable(bad)
	}
}

// badChangesLocked compares the undecodable objects before a list with
// the store's now, and returns a function that logs, once per object, each
// one that stopped decoding or decodes again. Call it after unlocking mu.
func (i *Informer[T]) badChangesLocked(before map[objKey]error) (report func()) {
	var stopped []error
	var again []string
	for k, err := range i.store.bad {
		if _, was := before[k]; !was {
			stopped = append(stopped, err)
		}
	}
	for k := range before {
		_, still := i.store.bad[k]
		if _, stored := i.store.get(k.namespace, k.name); !still && stored {
			again = append(again, nsKey(k.namespace, k.name))
		}
	}
	return func() {
		for _, err := range stopped {
			i.logUndecodable(err)
		}
		for _, key := range again {
			i.log.Info("kctl: cache decodes an object again", "resource", i.res.String(), "object", key)
		}
	}
}

// logUndecodable logs that an object does not decode into T (err names it).
func (i *Informer[T]) logUndecodable(err error) {
	i.log.Warn("kctl: cache could not decode an object: it keeps the object's last good copy, if any, "+
		"until the object decodes again or is deleted; fix the object or the Go type", "resource", i.res.String(), "err", err)
}
