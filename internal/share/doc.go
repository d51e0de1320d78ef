// Package share makes the objects of kctl's cache keep one copy of what
// many of them hold alike.
//
// The Pods of one workload carry the same containers, volumes, tolerations,
// labels and owner; decoded, each Pod holds its own copy of every one of
// them, which is most of a cached Pod's memory. Before an object is stored,
// a Sharer makes it point at equal parts of objects stored before, so the
// copies decoded for this object become garbage.
//
// It works bottom up over the memory of the new object: strings, string maps
// and resource lists are swapped for equal ones seen before; then every
// pointer's target and every slice's elements, whose own parts are by now
// shared, are compared byte for byte (padding zeroed) with earlier ones of
// the same Go type, found by a hash. Equal bytes mean equal values (the
// pointers in them are the same pointers), so a match is always right; a miss
// only costs memory. So a difference unshares only the blocks that hold it:
// a Pod's own token volume name unshares its volume list, the mounts that
// name it and the containers that hold those mounts, while each container's
// env, ports, resources, probes and image, and each volume's source, still
// share. A slice left unshared, its elements unique to the object, is
// copied into memory only as long as its elements if the decoder left
// spare room (5 conditions in room for 8); a string the object holds twice
// (the token volume's name, in each mount) is held once.
//
// The sharer keeps nothing alive: it finds earlier parts through weak
// pointers, so a part lives exactly as long as some object holds it, and a
// stream of unique values (names, IPs, the old versions of objects updated
// often) pins nothing. A part is remembered the second time it is seen (in
// another object), so values unique to one object cost no entry; the first
// object keeps its own copy. The weak pointers point only at copies the
// sharer made itself, which are always on the heap (an object's parts need
// not be: a transform may set a string constant or a pointer to a variable).
//
// Cached objects are read-only by contract (see kctl's Informer), which is
// what makes sharing safe; readers that modify get deep copies (Client,
// Reconcile). A shared slice's capacity is its length, so even a wrongful
// append copies.
//
// The package is the only one in kctl that uses unsafe: plan.go works out,
// once per Go type and by reflection, where a value's shareable parts are;
// sharer.go walks a new object's memory by that plan.
package share
