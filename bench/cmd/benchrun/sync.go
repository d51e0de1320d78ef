package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
)

// syncNamespace holds the Pods of the initial-sync benchmark.
const syncNamespace = "bench-sync"

// A syncer starts one stack's informer for Pods in every namespace, calls
// added for each Added event its handler receives, and returns once the
// informer reports synced, with a function that counts the cached objects.
type syncer func(ctx context.Context, cfg *rest.Config, added func()) (objects func() int, err error)

// syncers by stack name; sync_kctl.go adds kctl.
var syncers = map[string]syncer{
	"controller-runtime": syncControllerRuntime(false),
	// controller-runtime with its TransformStripManagedFields, as kctl's cache does by default.
	"controller-runtime-strip-managedfields": syncControllerRuntime(true),
	"client-go":                              syncClientGo,
}

// syncStacks is the order of the sync table: the podcount stacks, kctl and
// controller-runtime each followed by its variant with the other's
// managedFields policy when the other is measured too, and kctl by
// kctl-paged (its first sync in pages, not the watch-list stream) and
// kctl-metadata (the Pods' metadata only).
func syncStacks(stacks []string) []string {
	variant := map[string][2]string{"kctl": {"kctl-keep-managedfields", "controller-runtime"},
		"controller-runtime": {"controller-runtime-strip-managedfields", "kctl"}}
	var out []string
	for _, s := range stacks {
		out = append(out, s)
		if s == "kctl" {
			out = append(out, "kctl-paged", "kctl-metadata")
		}
		out = append(out, podcountStacks[s]...)
		if v, ok := variant[s]; ok && slices.Contains(stacks, v[1]) {
			out = append(out, v[0])
		}
	}
	return out
}

// syncStacks is the sync table's stacks: -sync-stacks if given, else
// syncStacks(env.stacks).
func (env *env) syncStacks() []string {
	if env.syncOnly != nil {
		return env.syncOnly
	}
	return syncStacks(env.stacks)
}

// syncClientGo is client-go as shipped: its typed clients prefer protobuf,
// and its reflector streams the initial list (WatchListClient, on since v0.35).
func syncClientGo(ctx context.Context, cfg *rest.Config, added func()) (func() int, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(any) { added() }}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, errors.New("client-go informer did not sync")
	}
	return func() int { return len(inf.GetStore().ListKeys()) }, nil
}

func syncControllerRuntime(strip bool) syncer {
	return func(ctx context.Context, cfg *rest.Config, added func()) (func() int, error) {
		cfg.QPS = -1 // what controller-runtime's GetConfig does
		var opts crcache.Options
		if strip {
			opts.DefaultTransform = crcache.TransformStripManagedFields()
		}
		c, err := crcache.New(cfg, opts)
		if err != nil {
			return nil, err
		}
		inf, err := c.GetInformer(ctx, &corev1.Pod{})
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(any) { added() }}); err != nil {
			return nil, err
		}
		go c.Start(ctx)
		if !c.WaitForCacheSync(ctx) {
			return nil, errors.New("controller-runtime cache did not sync")
		}
		return func() int {
			if s, ok := inf.(interface{ GetStore() toolscache.Store }); ok {
				return len(s.GetStore().ListKeys())
			}
			return -1
		}, nil
	}
}

// syncResult is what a sync child prints, as one JSON line.
type syncResult struct {
	Stack        string  `json:"stack"`
	Seconds      float64 `json:"seconds"`        // from making the cache to synced with every Added event handled
	HeapMB       float64 `json:"heap_mb"`        // HeapAlloc after GC, minus before
	TotalAllocMB float64 `json:"total_alloc_mb"` // TotalAlloc after, minus before
	PeakRSSMB    float64 `json:"peak_rss_mb"`    // the process's peak resident set (VmHWM) when synced
	Objects      int     `json:"objects"`
	Events       int64   `json:"events"`
	// CPUSeconds is the child's user and system CPU time over its whole
	// life (start, sync, the measurement's collections, exit), set by
	// the parent: on a loaded machine it varies far less than Seconds.
	CPUSeconds float64 `json:"-"`
}

// peakRSS is the process's peak resident set size in MB (VmHWM).
func peakRSS() (float64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 64)
			return n * 1024 / 1e6, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/self/status")
}

// syncChild is `benchrun sync-child`: one measurement in a fresh process.
func syncChild(args []string) error {
	fs := flag.NewFlagSet("sync-child", flag.ExitOnError)
	stack := fs.String("stack", "", "stack to measure")
	kubeconfig := fs.String("kubeconfig", os.Getenv("KCTL_TEST_KUBECONFIG"), "kubeconfig")
	want := fs.Int("want", 0, "Pods expected in the cache")
	profile := fs.String("heapprofile", "", "write a heap profile (in use and allocated since start) to this file")
	rate := fs.Int("memprofilerate", 4096, "with -heapprofile: record one allocation every this many bytes (1: every allocation, exact but slow)")
	fs.Parse(args)
	if *profile != "" {
		runtime.MemProfileRate = *rate
	}
	sync, ok := syncers[*stack]
	if !ok {
		return fmt.Errorf("unknown stack %q", *stack)
	}
	cfg, err := loadConfig(*kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var events atomic.Int64
	all := make(chan struct{})
	added := func() {
		if events.Add(1) == int64(*want) {
			close(all)
		}
	}

	before := memStats()
	start := time.Now()
	objects, err := sync(ctx, cfg, added)
	if err != nil {
		return err
	}
	select {
	case <-all:
	case <-ctx.Done():
		return fmt.Errorf("%s: handler got %d of %d Added events", *stack, events.Load(), *want)
	}
	took := time.Since(start)
	peak, err := peakRSS()
	if err != nil {
		return err
	}
	after := memStats()
	res := syncResult{Stack: *stack, Seconds: took.Seconds(),
		HeapMB:       (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / 1e6,
		TotalAllocMB: float64(after.TotalAlloc-before.TotalAlloc) / 1e6, PeakRSSMB: peak,
		Objects: objects(), Events: events.Load()}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			return err
		}
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

func memStats() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// syncPhase fills syncNamespace and runs every stack's child env.syncRuns times, alternating.
func syncPhase(ctx context.Context, env *env) (map[string][]syncResult, error) {
	stacks := env.syncStacks()
	// kctl-base's child is the -kctl-base checkout's benchrun, measuring its kctl.
	child := map[string][]string{}
	for _, st := range stacks {
		child[st] = []string{env.self, "-stack", st}
	}
	if slices.Contains(stacks, "kctl-base") {
		bin := filepath.Join(env.binDir, "benchrun-kctl-base")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/benchrun")
		cmd.Dir = baseBenchDir(env)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building the kctl-base sync child in %s: %v\n%s", cmd.Dir, err, out)
		}
		child["kctl-base"] = []string{bin, "-stack", "kctl"}
	}
	if err := ensureNamespace(ctx, env.cs, syncNamespace); err != nil {
		return nil, err
	}
	env.progress("sync: creating %d Pods in %s", env.syncPods, syncNamespace)
	start := time.Now()
	create := createPods
	switch env.syncFixture {
	case "varied":
		create = createVariedPods
	case "uniform":
	default:
		return nil, fmt.Errorf("-sync-fixture %q: want varied or uniform", env.syncFixture)
	}
	if err := create(ctx, env.cs, syncNamespace, "pod", env.syncPods); err != nil {
		return nil, err
	}
	if err := createOwners(ctx, env.cs, syncNamespace); err != nil {
		return nil, err
	}
	env.progress("sync: created in %.1f s", time.Since(start).Seconds())
	if err := env.describePod(ctx); err != nil {
		return nil, err
	}
	all, err := env.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	want := len(all.Items) // the sync Pods, plus any left in the cluster (none when earlier phases cleaned up)
	all = nil
	out := map[string][]syncResult{}
	for run := range env.syncRuns {
		for _, st := range rotate(stacks, run) {
			c := child[st]
			args := []string{"sync-child", c[1], c[2], "-kubeconfig", env.kubeconfig, "-want", fmt.Sprint(want)}
			if env.syncHeapDir != "" {
				args = append(args, "-heapprofile", filepath.Join(env.syncHeapDir, fmt.Sprintf("sync-%s-%d.pprof", st, run)))
				if env.syncHeapRate != 0 {
					args = append(args, "-memprofilerate", fmt.Sprint(env.syncHeapRate))
				}
			}
			cmd := exec.CommandContext(ctx, c[0], args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				return nil, fmt.Errorf("sync child %s: %v\n%s", st, err, stderr.String())
			}
			var r syncResult
			if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
				return nil, fmt.Errorf("sync child %s printed %q: %v", st, stdout.String(), err)
			}
			r.CPUSeconds = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
			if r.Objects != want {
				return nil, fmt.Errorf("sync child %s cached %d Pods, want %d", st, r.Objects, want)
			}
			env.progress("sync run %d %-18s %.2f s, CPU %.2f s, heap %.1f MB, alloc %.1f MB, peak RSS %.1f MB",
				run+1, st, r.Seconds, r.CPUSeconds, r.HeapMB, r.TotalAllocMB, r.PeakRSSMB)
			out[st] = append(out[st], r)
		}
	}
	return out, nil
}

// describePod records the size of one benchmark Pod as the server stores it.
func (env *env) describePod(ctx context.Context) error {
	list, err := env.cs.CoreV1().Pods(syncNamespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return err
	}
	if len(list.Items) == 0 {
		return fmt.Errorf("no Pods in %s", syncNamespace)
	}
	p := &list.Items[0]
	b, err := p.Marshal()
	if err != nil {
		return err
	}
	p.ManagedFields = nil
	nb, _ := p.Marshal()
	env.podBytes, env.podBytesNoMF = len(b), len(nb)
	return nil
}

func syncTable(env *env, res map[string][]syncResult) (string, []target) {
	t := &table{head: []string{"stack", "time to synced (s)", "retained heap (MB)", "total allocation (MB)", "peak RSS (MB)",
		"process CPU (s)", "runs"}}
	med := map[string][4]float64{}
	sums := map[string][4]summary{}
	cpu := map[string]summary{}
	for _, st := range env.syncStacks() {
		var sec, heap, alloc, rss, cpus []float64
		for _, r := range res[st] {
			sec, heap, alloc = append(sec, r.Seconds), append(heap, r.HeapMB), append(alloc, r.TotalAllocMB)
			rss = append(rss, r.PeakRSSMB)
			cpus = append(cpus, r.CPUSeconds)
		}
		s, h, a, p := summarize(sec), summarize(heap), summarize(alloc), summarize(rss)
		med[st], sums[st] = [4]float64{s.median, h.median, a.median, p.median}, [4]summary{s, h, a, p}
		cpu[st] = summarize(cpus)
		t.add(st, s.format(2), h.format(1), a.format(1), p.format(1), cpu[st].format(2), fmt.Sprint(s.n))
	}
	for _, other := range []string{"controller-runtime", "controller-runtime-strip-managedfields", "client-go"} {
		k, o := med["kctl"], med[other]
		if _, ok := res["kctl"]; !ok || len(res[other]) == 0 {
			continue
		}
		t.add("kctl / "+other, ratio(k[0], o[0]), ratio(k[1], o[1]), ratio(k[2], o[2]), ratio(k[3], o[3]),
			ratio(cpu["kctl"].median, cpu[other].median), "")
	}
	for _, base := range []string{"kctl-paged", "kctl-base"} {
		if len(res["kctl-metadata"]) > 0 && base == "kctl-paged" {
			m := med["kctl-metadata"]
			k := med["kctl"]
			t.add("kctl-metadata / kctl", ratio(m[0], k[0]), ratio(m[1], k[1]), ratio(m[2], k[2]), ratio(m[3], k[3]),
				ratio(cpu["kctl-metadata"].median, cpu["kctl"].median), "")
		}
		if len(res["kctl"]) > 0 && len(res[base]) > 0 {
			k, b := sums["kctl"], sums[base]
			t.add("kctl / "+base, versus(k[0], b[0]), versus(k[1], b[1]), versus(k[2], b[2]), versus(k[3], b[3]),
				versus(cpu["kctl"], cpu[base]), "")
		}
	}
	pk, pm, pcr := med["kctl-podcount"], med["kctl-podcount-metadata"], med["controller-runtime-podcount-metadata"]
	for _, row := range [][2]string{{"kctl-podcount-metadata", "kctl-podcount"}, {"kctl-podcount-metadata", "controller-runtime-podcount-metadata"}} {
		if len(res[row[0]]) > 0 && len(res[row[1]]) > 0 {
			a, b := med[row[0]], med[row[1]]
			t.add(row[0]+" / "+row[1], ratio(a[0], b[0]), ratio(a[1], b[1]), ratio(a[2], b[2]), ratio(a[3], b[3]),
				ratio(cpu[row[0]].median, cpu[row[1]].median), "")
		}
	}
	var ts []target
	podcountKnown := len(res["kctl-podcount"]) > 0 && len(res["kctl-podcount-metadata"]) > 0
	crMetaKnown := len(res["kctl-podcount-metadata"]) > 0 && len(res["controller-runtime-podcount-metadata"]) > 0
	ts = append(ts,
		target{"sync: podcount's retained heap, OwnsMetadata vs Owns", "<= 0.2x", ratio(pm[1], pk[1]), podcountKnown && pm[1] <= 0.2*pk[1], podcountKnown},
		target{"sync: podcount's retained heap, OwnsMetadata vs controller-runtime's OnlyMetadata", "<= 0.5x", ratio(pm[1], pcr[1]), crMetaKnown && pm[1] <= 0.5*pcr[1], crMetaKnown})
	k, cr, paged := med["kctl"], med["controller-runtime"], med["kctl-paged"]
	streamed := len(res["kctl"]) > 0 && len(res["kctl-paged"]) > 0
	ts = append(ts,
		target{"sync: peak RSS of the watch-list stream vs kctl's paged list", "<= 0.6x", ratio(k[3], paged[3]), streamed && k[3] <= 0.6*paged[3], streamed},
		target{"sync: time to synced of the watch-list stream vs kctl's paged list", "<= 1.0x", ratio(k[0], paged[0]), streamed && k[0] <= paged[0], streamed})
	m := med["kctl-metadata"]
	metaKnown := len(res["kctl"]) > 0 && len(res["kctl-metadata"]) > 0
	ts = append(ts, target{"sync: retained heap of the Pods' metadata vs whole Pods", "<= 0.2x", ratio(m[1], k[1]), metaKnown && m[1] <= 0.2*k[1], metaKnown})
	known := len(res["kctl"]) > 0 && len(res["controller-runtime"]) > 0
	ts = append(ts,
		target{"sync: retained heap vs controller-runtime", "<= 0.5x", ratio(k[1], cr[1]), known && k[1] <= 0.5*cr[1], known},
		target{"sync: total allocation vs controller-runtime", "<= 0.6x", ratio(k[2], cr[2]), known && k[2] <= 0.6*cr[2], known},
		target{"sync: median time to synced vs controller-runtime", "<= 0.7x", ratio(k[0], cr[0]), known && k[0] <= 0.7*cr[0], known})
	return t.String(), ts
}
