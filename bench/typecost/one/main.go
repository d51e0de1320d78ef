// Command one is a kctl controller of one type (Pod), for benchrun's
// per-type binary cost: its size less that of floor/onetype (the same
// type's code, rest, clientcmd and one request, without kctl) is kctl's own
// cost; five less floor/fivetypes, less that, is the cost of four more
// types. Its reconcile reads (Get, List) and writes (Update) the type, as
// a controller does. It is built, never run.
package main

import (
	"context"
	"fmt"

	"github.com/kctl-dev/kctl"
	corev1 "k8s.io/api/core/v1"
)

func main() {
	cfg, err := kctl.LoadConfig("")
	if err != nil {
		panic(err)
	}
	mgr, err := kctl.NewManager(kctl.Options{Config: cfg})
	if err != nil {
		panic(err)
	}
	control[corev1.Pod](mgr, "pods")
	fmt.Println(mgr.Start(context.Background()))
}

// control adds a controller of T that reads and writes T's objects.
func control[T any, PT kctl.Object[T]](mgr *kctl.Manager, name string) {
	objects := kctl.ClientFor[T, PT](mgr)
	kctl.NewController[T, PT](mgr, name, func(ctx context.Context, obj *T) (kctl.Result, error) {
		m := PT(obj)
		all, err := objects.List(ctx, kctl.ListOptions{Namespace: m.GetNamespace()})
		if err != nil {
			return kctl.Result{}, err
		}
		cur, err := objects.Get(ctx, m.GetNamespace(), m.GetName())
		if err != nil {
			return kctl.Result{}, err
		}
		PT(cur).SetAnnotations(map[string]string{"count": fmt.Sprint(len(all))})
		return kctl.Result{}, objects.Update(ctx, cur)
	})
}
