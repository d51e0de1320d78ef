package main

// benchrun shard: the sync and reconcile throughput of the podcount
// controller written with kctl, run as 1, 2 and 3 replicas of one shard
// group (Manager.Shard), over many ReplicaSets in realistically named
// namespaces. It needs a control plane with the feature gate
// ShardedListAndWatch, so that each replica lists and watches only its
// share:
//
//	go build -o .cache/bin/controlplane ./hack/controlplane
//	(cd bench && go build -o bin/benchrun ./cmd/benchrun)
//	.cache/bin/controlplane run -apiserver-flag=--feature-gates=ShardedListAndWatch=true -- \
//	  bench/bin/benchrun shard -bench-dir bench -out bench/bin/shard.md
//
// Each run starts N processes of bench/podcount/kctl --shards in a fresh
// group at once and measures, from their start, until every replica sees
// N members, the group's ranges are all served, the replicas' caches hold
// every ReplicaSet exactly once between them, the reconciles add up to at
// least one per ReplicaSet, and every work queue is empty with no worker
// busy. The ReplicaSets are created already labelled pod-count=0 and have
// no Pods, so a reconcile reads the cache and writes nothing: the run
// measures listing, watching, caching, membership and the work queue, not
// the API server's write path.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kctl-dev/kctl/internal/podfixture"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// shardEnv is the configuration of benchrun shard.
type shardEnv struct {
	kubeconfig, benchDir, bin, logDir, leaseNS string
	cs                                         *kubernetes.Clientset
	total, namespaces, runs, workers, ranges   int
	pods                                       int // per ReplicaSet
	replicas                                   []int
	qps                                        float64
	limit                                      time.Duration
	started                                    time.Time
}

// shardRun is what one run measured; per-replica slices are in replica
// order.
type shardRun struct {
	replicas    int
	seconds     float64 // start to every ReplicaSet synced and reconciled
	settled     float64 // start to every replica seeing n members and all ranges served
	reconciles  float64 // sum over the replicas
	handovers   float64
	cached      []float64 // ReplicaSets in each replica's cache
	heapMB      []float64 // live heap after a GC, each replica
	cacheMB     []float64 // kctl_cache_bytes, each replica
	cpu         []float64 // each replica's CPU seconds until done
	planeCPU    float64   // kube-apiserver + etcd CPU seconds during the run
	cpuFraction float64   // all CPU used over the run's wall time, in cores
}

func shardCommand(args []string) error {
	se := &shardEnv{started: time.Now()}
	fs := flag.NewFlagSet("shard", flag.ExitOnError)
	fs.StringVar(&se.kubeconfig, "kubeconfig", os.Getenv("KCTL_TEST_KUBECONFIG"), "admin kubeconfig of the control plane")
	fs.StringVar(&se.benchDir, "bench-dir", ".", "the bench module")
	fs.IntVar(&se.total, "replicasets", 30000, "ReplicaSets in all (created once, kept between runs)")
	fs.IntVar(&se.pods, "pods-per-replicaset", 0, "Pods of each ReplicaSet (realistic, with a controller owner reference)")
	fs.IntVar(&se.namespaces, "namespaces", 300, "namespaces they are spread over, named as clusters name them")
	fs.IntVar(&se.runs, "runs", 3, "runs of each replica count, alternating")
	fs.IntVar(&se.workers, "workers", 2, "concurrent reconciles per replica")
	fs.IntVar(&se.ranges, "ranges", 64, "ShardOptions.Ranges (kctl's default); only used to check all are served")
	fs.Float64Var(&se.qps, "qps", 500, "client QPS (and burst) of each replica")
	fs.DurationVar(&se.limit, "limit", 5*time.Minute, "longest a run may take")
	counts := fs.String("replica-counts", "1,2,3", "replica counts to compare")
	out := fs.String("out", "", "also write the markdown report to this file")
	fs.Parse(args)
	for _, f := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return fmt.Errorf("-replica-counts: %q is not a positive number", f)
		}
		se.replicas = append(se.replicas, n)
	}
	if se.kubeconfig == "" {
		return errors.New("no KCTL_TEST_KUBECONFIG: run through `controlplane run -apiserver-flag=--feature-gates=ShardedListAndWatch=true -- ...`")
	}
	var err error
	if se.benchDir, err = filepath.Abs(se.benchDir); err != nil {
		return err
	}
	se.bin = filepath.Join(se.benchDir, "bin", "podcount-kctl-shard")
	se.logDir = filepath.Join(se.benchDir, "bin", "logs")
	if err := os.MkdirAll(se.logDir, 0o755); err != nil {
		return err
	}
	if se.cs, err = harnessClient(se.kubeconfig); err != nil {
		return err
	}
	loadStart := loadavg()
	se.progress("building bench/podcount/kctl")
	build := exec.Command("go", append(append([]string{"build"}, buildFlags...), "-o", se.bin, pkgOf["kctl"])...)
	build.Dir = se.benchDir
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkgOf["kctl"], err, b)
	}
	ctx := context.Background()
	if err := se.fixture(ctx); err != nil {
		return err
	}
	results := map[int][]shardRun{}
	for r := range se.runs {
		for _, n := range rotate(se.replicas, r) {
			res, err := se.run(ctx, r, n)
			if err != nil {
				return fmt.Errorf("run %d, %d replicas: %w", r+1, n, err)
			}
			se.progress("run %d, %d replicas: settled %.1f s, done %.1f s, %.0f reconciles, %.0f handovers, cached %v, heap MB %v, CPU s %v, control plane CPU %.1f s",
				r+1, n, res.settled, res.seconds, res.reconciles, res.handovers, res.cached, rounded(res.heapMB), rounded(res.cpu), res.planeCPU)
			results[n] = append(results[n], res)
		}
	}
	report := se.report(results, loadStart)
	return writeReport(*out, report)
}

func (se *shardEnv) progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%5.0fs] %s\n", time.Since(se.started).Seconds(), fmt.Sprintf(format, args...))
}

// fixture creates the Leases' namespace, the namespaces and the
// ReplicaSets (each already labelled pod-count=<its Pods>, as podcount
// would) with their Pods; it fails unless the cluster then holds exactly
// these (a fresh control plane).
func (se *shardEnv) fixture(ctx context.Context) error {
	se.leaseNS = "kctl-bench-shard"
	nss := podfixture.Namespaces(se.namespaces)
	for _, ns := range append([]string{se.leaseNS}, nss...) {
		if err := ensureNamespace(ctx, se.cs, ns); err != nil {
			return err
		}
	}
	perNS := (se.total + len(nss) - 1) / len(nss)
	se.progress("creating %d ReplicaSets in %d namespaces", se.total, len(nss))
	start := time.Now()
	err := parallel(se.total, 16, func(i int) error {
		rs := replicaSet(nss[i/perNS], fmt.Sprintf("web-%05d", i%perNS), 0)
		rs.Labels["pod-count"] = strconv.Itoa(se.pods)
		made, err := se.cs.AppsV1().ReplicaSets(rs.Namespace).Create(ctx, rs, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		for j := 0; err == nil && j < se.pods; j++ {
			pod := ownedPod(made, fmt.Sprintf("%s-%d", made.Name, j))
			_, err = se.cs.CoreV1().Pods(rs.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: fieldManager})
		}
		return err
	})
	if err != nil {
		return err
	}
	list, err := se.cs.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	if len(list.Items) != se.total {
		return fmt.Errorf("the cluster holds %d ReplicaSets, want %d: use a fresh control plane", len(list.Items), se.total)
	}
	pods, err := se.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	if len(pods.Items) != se.total*se.pods {
		return fmt.Errorf("the cluster holds %d Pods, want %d: use a fresh control plane", len(pods.Items), se.total*se.pods)
	}
	se.progress("fixture ready in %.0f s", time.Since(start).Seconds())
	return nil
}

// replica is one podcount process of a run and where to scrape it.
type replica struct {
	p                *proc
	metrics, pprofAt string
}

// run starts n replicas in a fresh group and measures until done.
func (se *shardEnv) run(ctx context.Context, r, n int) (shardRun, error) {
	res := shardRun{replicas: n}
	group := fmt.Sprintf("bench-%d-%d", r, n)
	plane := controlPlanePIDs(se.kubeconfig)
	planeStart := sumCPU(plane)
	reps := make([]replica, 0, n)
	defer func() {
		for _, rep := range reps {
			rep.p.stop()
		}
	}()
	start := time.Now()
	for i := range n {
		ports, err := freeLoopbackPorts(2)
		if err != nil {
			return res, err
		}
		rep := replica{metrics: "http://" + ports[0] + "/metrics", pprofAt: "http://" + ports[1] + "/debug/pprof/heap?gc=1"}
		log := filepath.Join(se.logDir, fmt.Sprintf("shard-%s-%d.log", group, i))
		rep.p, err = startProc(se.bin, log, "--kubeconfig", se.kubeconfig, "--qps", fmt.Sprint(se.qps),
			"--workers", fmt.Sprint(se.workers), "--metrics-addr", ports[0], "--pprof-addr", ports[1],
			"--shards", "--shard-group", group, "--shard-namespace", se.leaseNS, "--shard-identity", fmt.Sprintf("r%d", i))
		if err != nil {
			return res, err
		}
		reps = append(reps, rep)
	}
	var last []map[string]float64
	for {
		if time.Since(start) > se.limit {
			return res, fmt.Errorf("not done after %v; last scrape: %v", se.limit, last)
		}
		time.Sleep(100 * time.Millisecond)
		last = last[:0]
		for _, rep := range reps {
			if err := rep.p.exited(); err != nil {
				return res, err
			}
			m, err := scrape(rep.metrics)
			if err != nil {
				m = nil // not serving yet
			}
			last = append(last, m)
		}
		if res.settled == 0 && se.settled(last, n) {
			res.settled = time.Since(start).Seconds()
		}
		if res.settled != 0 && se.done(last, n) {
			break
		}
	}
	res.seconds = time.Since(start).Seconds()
	wall := res.seconds
	all := 0.0
	for i, rep := range reps {
		c, err := cpuSeconds(rep.p.pid())
		if err != nil {
			return res, err
		}
		res.cpu = append(res.cpu, c)
		all += c
		m := last[i]
		res.reconciles += m["reconciles"]
		res.handovers += m["handovers"]
		res.cached = append(res.cached, m["cached"])
		res.cacheMB = append(res.cacheMB, m["cache_bytes"]/1e6)
	}
	res.planeCPU = sumCPU(plane) - planeStart
	res.cpuFraction = (all + res.planeCPU) / wall
	for _, rep := range reps {
		if err := collectGarbage(rep.pprofAt); err != nil {
			return res, err
		}
		m, err := scrape(rep.metrics)
		if err != nil {
			return res, err
		}
		res.heapMB = append(res.heapMB, m["heap"]/1e6)
	}
	return res, nil
}

// settled reports whether every replica of n sees n members and the
// group's ranges are all served.
func (se *shardEnv) settled(ms []map[string]float64, n int) bool {
	var owned float64
	for _, m := range ms {
		if m == nil || m["members"] != float64(n) {
			return false
		}
		owned += m["owned"]
	}
	return owned == float64(se.ranges)
}

// done reports whether every replica of n sees n members, the ranges are
// all served, the caches hold every ReplicaSet once between them, the
// reconciles add up to one per ReplicaSet and nothing is queued or busy.
func (se *shardEnv) done(ms []map[string]float64, n int) bool {
	var owned, cached, pods, reconciles float64
	for _, m := range ms {
		if m == nil || m["members"] != float64(n) || m["depth"] != 0 || m["active"] != 0 {
			return false
		}
		owned += m["owned"]
		cached += m["cached"]
		pods += m["pods"]
		reconciles += m["reconciles"]
	}
	podsOK := pods == float64(se.total*se.pods)
	return owned == float64(se.ranges) && cached == float64(se.total) && podsOK && reconciles >= float64(se.total)
}

func rounded(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(int(x*10+0.5)) / 10
	}
	return out
}

// report is the markdown table of the runs, one row per replica count.
func (se *shardEnv) report(results map[int][]shardRun, loadStart string) string {
	t := &table{head: []string{"replicas", "group settled (s)", "synced + reconciled (s)", "vs 1 replica", "after settling (s)", "vs 1 replica (after settling)", "reconciles/s after settling",
		"ReplicaSets cached per replica", "live heap per replica (MB)", "kctl_cache_bytes per replica (MB)",
		"CPU per replica (s)", "CPU all replicas (s)", "control plane CPU (s)", "cores busy (replicas + control plane)", "handovers"}}
	base := summarize(timesOf(results[1], false))
	baseAfter := summarize(timesOf(results[1], true))
	for _, n := range se.replicas {
		runs := results[n]
		var settled, secs, after, rate, cachedMin, cachedMax, heap, cacheMB, cpu, cpuAll, plane, cores, hand []float64
		for _, r := range runs {
			settled = append(settled, r.settled)
			secs = append(secs, r.seconds)
			after = append(after, r.seconds-r.settled)
			rate = append(rate, r.reconciles/(r.seconds-r.settled))
			cachedMin = append(cachedMin, slices.Min(r.cached))
			cachedMax = append(cachedMax, slices.Max(r.cached))
			heap = append(heap, r.heapMB...)
			cacheMB = append(cacheMB, r.cacheMB...)
			cpu = append(cpu, r.cpu...)
			all := 0.0
			for _, c := range r.cpu {
				all += c
			}
			cpuAll = append(cpuAll, all)
			plane = append(plane, r.planeCPU)
			cores = append(cores, r.cpuFraction)
			hand = append(hand, r.handovers)
		}
		s := summarize(secs)
		a := summarize(after)
		t.add(fmt.Sprint(n), summarize(settled).format(1), s.format(1), ratio(s.median, base.median),
			a.format(1), ratio(a.median, baseAfter.median), summarize(rate).format(0),
			fmt.Sprintf("%.0f–%.0f", slices.Min(cachedMin), slices.Max(cachedMax)),
			summarize(heap).format(1), summarize(cacheMB).format(1), summarize(cpu).format(1),
			summarize(cpuAll).format(1), summarize(plane).format(1), summarize(cores).format(2), summarize(hand).format(0))
	}
	var b strings.Builder
	what := "no Pods"
	if se.pods > 0 {
		what = fmt.Sprintf("%d realistic Pod(s) each, %d Pods in all, whole Pods cached (Owns)", se.pods, se.total*se.pods)
	}
	fmt.Fprintf(&b, "%d ReplicaSets (%s) in %d namespaces (team-a, payments-prod, ..., tenant-0001...), "+
		"podcount (bench/podcount/kctl --shards, %d workers, client QPS %v) as N processes of one fresh shard group started at once; "+
		"group settled: from their start until every replica sees N members and all ranges are served; "+
		"synced + reconciled: from their start until every replica sees N members, all %d ranges are served, the caches hold every ReplicaSet (and Pod) once "+
		"between them, the reconciles add up to one per ReplicaSet and no queue holds work. The ReplicaSets are already labelled, "+
		"so a reconcile writes nothing. Live heap: go_memstats_heap_alloc_bytes after a GC (pprof heap?gc=1), once done. "+
		"CPU: utime+stime until done. Replica counts alternate run by run, %d runs each; median (min–max), per-replica columns "+
		"over every replica of every run.\n\n%s\nLoad average (1, 5, 15 min) at the start: %s; at the end: %s. %d CPUs.\n",
		se.total, what, se.namespaces, se.workers, se.qps, se.ranges, se.runs, t, loadStart, loadavg(), runtime.NumCPU())
	return b.String()
}

// timesOf is the runs' times to done, or from settled to done.
func timesOf(runs []shardRun, afterSettling bool) []float64 {
	var xs []float64
	for _, r := range runs {
		x := r.seconds
		if afterSettling {
			x -= r.settled
		}
		xs = append(xs, x)
	}
	return xs
}
