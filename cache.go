package kctl

import "context"

// Informer keeps a local, read-only copy of one resource's objects.
type Informer[T any] struct{}

func (i *Informer[T]) Get(namespace, name string) (*T, bool)  { panic("stub") }
func (i *Informer[T]) List(opts ListOptions) []*T             { panic("stub") }
func (i *Informer[T]) HasSynced() bool                        { panic("stub") }
func (i *Informer[T]) WaitForSync(ctx context.Context) error { panic("stub") }
