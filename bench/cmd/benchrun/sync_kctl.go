package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/kctl-dev/kctl"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

func init() {
	syncers["kctl"] = syncKctl(kctl.CacheOptions{})
	// kctl with managedFields kept, as the other stacks keep them by default.
	syncers["kctl-keep-managedfields"] = syncKctl(kctl.CacheOptions{KeepManagedFields: true})
	// kctl's first sync as a list in pages then a watch, not the watch-list
	// stream (client-go's switch, which kctl reads too).
	syncers["kctl-metadata"] = syncKctlMetadata
	paged := syncKctl(kctl.CacheOptions{})
	syncers["kctl-paged"] = func(ctx context.Context, cfg *rest.Config, added func()) (func() int, error) {
		if err := os.Setenv("KUBE_FEATURE_WatchListClient", "false"); err != nil {
			return nil, err
		}
		return paged(ctx, cfg, added)
	}
	// The watch-list stream with the collector at GOGC=50 (Go's default is
	// 100): what a smaller heap headroom does to the peak RSS of the sync.
	stream := syncKctl(kctl.CacheOptions{})
	syncers["kctl-gogc50"] = func(ctx context.Context, cfg *rest.Config, added func()) (func() int, error) {
		debug.SetGCPercent(50)
		return stream(ctx, cfg, added)
	}
}

// syncKctlMetadata is kctl caching the Pods' metadata only
// (MetadataInformerFor), as a controller that Owns them to find their
// owner and count them needs.
func syncKctlMetadata(ctx context.Context, cfg *rest.Config, added func()) (func() int, error) {
	conn, err := kctl.NewConn(cfg)
	if err != nil {
		return nil, err
	}
	c := kctl.NewCache(conn, kctl.CacheOptions{})
	inf, err := kctl.MetadataInformerFor[corev1.Pod](c)
	if err != nil {
		return nil, err
	}
	inf.AddHandler(func(ev kctl.Event[metav1.PartialObjectMetadata]) {
		if ev.Type == kctl.Added {
			added()
		}
	})
	go c.Start(ctx)
	if err := inf.WaitForSync(ctx); err != nil {
		return nil, fmt.Errorf("kctl metadata cache did not sync: %w", err)
	}
	return func() int { n, _ := inf.Stats(); return n }, nil
}

func syncKctl(opts kctl.CacheOptions) syncer {
	return func(ctx context.Context, cfg *rest.Config, added func()) (func() int, error) {
		conn, err := kctl.NewConn(cfg)
		if err != nil {
			return nil, err
		}
		c := kctl.NewCache(conn, opts)
		inf, err := kctl.InformerFor[corev1.Pod](c)
		if err != nil {
			return nil, err
		}
		inf.AddHandler(func(ev kctl.Event[corev1.Pod]) {
			if ev.Type == kctl.Added {
				added()
			}
		})
		go c.Start(ctx)
		if err := inf.WaitForSync(ctx); err != nil {
			return nil, fmt.Errorf("kctl cache did not sync: %w", err)
		}
		return func() int { n, _ := inf.Stats(); return n }, nil
	}
}
