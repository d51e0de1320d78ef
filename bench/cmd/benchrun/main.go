// Command benchrun measures the podcount controller written with kctl,
// controller-runtime and client-go, one stack at a time, and prints the
// results as markdown. Run it through `make bench` (bench/run.sh), which
// starts a local control plane and builds the binaries:
//
//	benchrun all [flags]        every measurement; markdown on stdout, progress on stderr
//	benchrun footprint|rss|e2e|sync|queue [flags]   one part
//	benchrun rss-probe [flags]  where each stack's idle RSS goes (not part of all)
//	benchrun prof-share [-focus RE] BINARY PROFILE...  share of profile samples under RE (default: kctl's history)
//	benchrun shard [flags]      1, 2 and 3 sharded replicas (needs a gated control plane: see shard.go)
//	benchrun sync-child -stack S -want N            one initial-sync measurement (used by sync)
//
// With -kctl-base DIR it also measures kctl as checked out in DIR, as the
// stack kctl-base, to compare two revisions of kctl in one sitting (see
// baseBenchDir).
//
// It needs KCTL_TEST_KUBECONFIG (set by `go run ./hack/controlplane run`),
// except for footprint and queue.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// env is the configuration of one benchmark run.
type env struct {
	self, benchDir, repoDir, binDir, logDir string
	kubeconfig, profileDir                  string
	profileHz                               int      // -cpuprofile-hz: CPU profile rate of kctl's binary
	syncOnly                                []string // -sync-stacks: exactly these sync stacks
	syncHeapDir                             string   // -sync-heapprofile-dir: a heap profile per sync child
	syncHeapRate                            int      // -sync-memprofilerate: the sync children's MemProfileRate (0: theirs)
	kctlBase                                string   // -kctl-base: another checkout of kctl, measured as the stack kctl-base
	cs                                      *kubernetes.Clientset
	stacks                                  []string

	runs, buildRuns, syncRuns, defaultQPSRuns int
	qps                                       float64
	syncPods, rssRS, rssPods                  int
	syncFixture                               string
	e2eRS, e2ePods, churnRate, churnSeconds   int
	podBytes, podBytesNoMF                    int
	started                                   time.Time
	loadStart                                 string
}

func (env *env) bin(stack string) string { return filepath.Join(env.binDir, "podcount-"+stack) }

// baseNote explains the kctl / kctl-base row of a table, if there is one.
func (env *env) baseNote() string {
	if !slices.Contains(env.stacks, "kctl-base") {
		return ""
	}
	return fmt.Sprintf("kctl-base is kctl from %s (%s); kctl / kctl-base is the ratio of the medians, then kctl-base's "+
		"min and max over its median: within its runs' spread if the ratio is at most the last.\n\n", env.kctlBase, gitRev(env.kctlBase))
}

// historyNote explains the kctl-history / kctl row of the end-to-end
// table, if there is one.
func historyNote(env *env) string {
	if !slices.Contains(env.stacks, "kctl-history") || !slices.Contains(env.stacks, "kctl") {
		return ""
	}
	return "kctl-history is kctl's binary run with --history: the Manager keeps each key's last reconciles " +
		"(Manager.KeepHistory, defaults: 10 entries for 1000 keys per controller). kctl-history / kctl is the ratio of the " +
		"medians, then kctl's min and max over its median: history costs nothing measurable if the ratio is within them.\n\n"
}

func (env *env) progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%5.0fs] %s\n", time.Since(env.started).Seconds(), fmt.Sprintf(format, args...))
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchrun all|footprint|rss|e2e|sync|queue|rss-probe|prof-share|shard|sync-child [flags]")
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "sync-child":
		err = syncChild(args)
	case "prof-share":
		err = profShare(args)
	case "shard":
		err = shardCommand(args) // shard.go: 1, 2 and 3 sharded replicas
	default:
		err = runParts(cmd, args)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchrun %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

func runParts(cmd string, args []string) error {
	parts := map[string][]string{
		"all": {"footprint", "rss", "e2e", "sync", "queue"}, "footprint": {"footprint"}, "rss": {"footprint", "rss"},
		"e2e": {"e2e"}, "sync": {"sync"}, "queue": {"queue"}, "rss-probe": {"rss-probe"},
	}[cmd]
	if parts == nil {
		return fmt.Errorf("unknown command %q", cmd)
	}
	env := &env{started: time.Now(), loadStart: loadavg()}
	var err error
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	fs.StringVar(&env.kubeconfig, "kubeconfig", os.Getenv("KCTL_TEST_KUBECONFIG"), "admin kubeconfig of the control plane")
	fs.StringVar(&env.benchDir, "bench-dir", ".", "the bench module")
	stacks := fs.String("stacks", "kctl,controller-runtime,client-go", "stacks to compare")
	fs.IntVar(&env.runs, "runs", 3, "runs of the idle RSS and end-to-end measurements")
	fs.IntVar(&env.buildRuns, "build-runs", 1, "cold builds per stack (each takes 1-4 minutes on 2 cores)")
	fs.IntVar(&env.syncRuns, "sync-runs", 7, "initial-sync runs per stack")
	fs.IntVar(&env.defaultQPSRuns, "default-qps-runs", 1, "end-to-end runs at each stack's default client QPS (0: skip)")
	fs.Float64Var(&env.qps, "qps", 500, "client QPS (and burst) given to the controllers")
	fs.IntVar(&env.syncPods, "sync-pods", 10000, "Pods for the initial sync")
	fs.StringVar(&env.syncFixture, "sync-fixture", "varied", "Pods for the initial sync: varied (20 workloads over 50 nodes, "+
		"each Pod with its own token volume and a kubelet's status: internal/podfixture) or uniform (one workload, no status)")
	fs.IntVar(&env.rssRS, "rss-replicasets", 200, "ReplicaSets for idle RSS")
	fs.IntVar(&env.rssPods, "rss-pods", 10, "Pods per ReplicaSet for idle RSS")
	fs.IntVar(&env.e2eRS, "e2e-replicasets", 500, "ReplicaSets for the end-to-end burst")
	fs.IntVar(&env.e2ePods, "e2e-pods", 3, "Pods per ReplicaSet for the end-to-end burst")
	fs.IntVar(&env.churnRate, "churn-rate", 20, "Pod changes per second in the churn")
	fs.IntVar(&env.churnSeconds, "churn-seconds", 15, "length of the churn")
	fs.StringVar(&env.profileDir, "cpuprofile-dir", "", "write a CPU profile of each end-to-end controller run into this folder (for analysis; adds overhead)")
	fs.IntVar(&env.profileHz, "cpuprofile-hz", 0, "with -cpuprofile-dir: kctl's binary (kctl, kctl-history) samples its CPU profile this "+
		"many times a second (Go's default 100 gives about 100 samples a run) and also writes its allocation profile (*.allocs.pprof)")
	syncOnly := fs.String("sync-stacks", "", "sync only these stacks (e.g. kctl,kctl-paged), not every variant of -stacks")
	fs.StringVar(&env.syncHeapDir, "sync-heapprofile-dir", "", "each sync child writes a heap profile (in use and allocated) into this folder")
	fs.IntVar(&env.syncHeapRate, "sync-memprofilerate", 0, "with -sync-heapprofile-dir: the children's runtime.MemProfileRate (1: every allocation; 0: the child's default, 4096)")
	fs.StringVar(&env.kctlBase, "kctl-base", "", "also measure kctl as checked out in this folder (e.g. a git worktree at "+
		"an older commit), as the stack kctl-base, built by that checkout's own bench module")
	variants := fs.String("probe-variants", "default,GOGC=50", "rss-probe: runtime settings to compare (see probeVariants)")
	out := fs.String("out", "", "also write the markdown report to this file")
	skip := fs.String("skip", "", "comma-separated parts to skip (footprint, rss, e2e, sync, queue)")
	fs.Parse(args)
	env.stacks = strings.Split(*stacks, ",")
	if *syncOnly != "" {
		env.syncOnly = strings.Split(*syncOnly, ",")
	}
	if env.kctlBase != "" && !slices.Contains(env.stacks, "kctl-base") {
		env.stacks = append(env.stacks, "kctl-base")
	}
	if slices.Contains(env.stacks, "kctl-base") {
		if env.kctlBase == "" {
			return fmt.Errorf("stack kctl-base needs -kctl-base DIR")
		}
		if env.kctlBase, err = filepath.Abs(env.kctlBase); err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(baseBenchDir(env), pkgOf["kctl"])); err != nil {
			return fmt.Errorf("-kctl-base: %w", err)
		}
	}
	for _, s := range strings.Split(*skip, ",") {
		parts = slices.DeleteFunc(parts, func(p string) bool { return p == s })
	}

	if env.self, err = os.Executable(); err != nil {
		return err
	}
	if env.benchDir, err = filepath.Abs(env.benchDir); err != nil {
		return err
	}
	env.repoDir, env.binDir = filepath.Dir(env.benchDir), filepath.Join(env.benchDir, "bin")
	env.logDir = filepath.Join(env.binDir, "logs")
	if err := os.MkdirAll(env.logDir, 0o755); err != nil {
		return err
	}
	needCluster := slices.ContainsFunc(parts, func(p string) bool { return p == "rss" || p == "e2e" || p == "sync" || p == "rss-probe" })
	if needCluster {
		if env.kubeconfig == "" {
			return fmt.Errorf("no KCTL_TEST_KUBECONFIG: run through `go run ./hack/controlplane run -- ...` (make bench does)")
		}
		if env.cs, err = harnessClient(env.kubeconfig); err != nil {
			return err
		}
	}
	ctx := context.Background()
	if !slices.Contains(parts, "footprint") && slices.ContainsFunc(parts, func(p string) bool { return p == "rss" || p == "e2e" }) {
		for _, st := range env.stacks {
			if _, _, err := build(env, st, nil); err != nil {
				return err
			}
		}
	}

	var report strings.Builder
	var targets []target
	fmt.Fprintf(&report, "%s\n", machine(env))
	fp := map[string]*footprint{}
	for _, part := range parts {
		env.progress("--- %s", part)
		var err error
		switch part {
		case "footprint":
			err = buildPhase(env, fp)
		case "rss":
			err = rssPhase(ctx, env, fp)
		case "e2e":
			err = e2eSection(ctx, env, &report, &targets)
		case "sync":
			var res map[string][]syncResult
			if res, err = syncPhase(ctx, env); err == nil {
				tab, ts := syncTable(env, res)
				fmt.Fprintf(&report, "### Initial sync\n\n%d %s Pods (%d bytes each as protobuf, %d without managedFields), "+
					"one informer on Pods in every namespace with one event handler; time from making the cache until it reports synced "+
					"and the handler has had every Added event; heap after runtime.GC. The *-podcount stacks are the podcount controller "+
					"(ReplicaSets, one per workload, owning the Pods; its reconcile counts them from the cache and writes nothing), "+
					"measured once every ReplicaSet has been reconciled with its count too: kctl with Owns (whole Pods), kctl with "+
					"OwnsMetadata, controller-runtime with Owns(&Pod{}, builder.OnlyMetadata). A fresh process per stack per run, %d alternating runs; "+
					"median (min–max).\n\n%s\n%s", env.syncPods, env.syncFixture, env.podBytes, env.podBytesNoMF, env.syncRuns, tab, env.baseNote())
				targets = append(targets, ts...)
			}
		case "queue":
			err = queueSection(env, &report)
		case "rss-probe":
			err = probeSection(ctx, env, strings.Split(*variants, ","), &report)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", part, err)
		}
		if part == "footprint" && !slices.Contains(parts, "rss") || part == "rss" {
			tab, ts := footprintTable(env, fp)
			floor, err := floorTable(env)
			if err != nil {
				return err
			}
			fmt.Fprintf(&report, "### Footprint\n\n%s\nWhat any binary with these parts weighs, built the same way:\n\n%s\n", tab, floor)
			targets = append(targets, ts...)
			costs, ts, err := typeCostTable(env)
			if err != nil {
				return err
			}
			fmt.Fprintf(&report, "kctl's own binary cost: each program less its floor, the same types' code without kctl:\n\n%s\n", costs)
			targets = append(targets, ts...)
		}
	}
	if len(targets) > 0 {
		fmt.Fprintf(&report, "### Targets\n\n%s\n", targetsTable(targets))
	}
	fmt.Fprintf(&report, "Total benchmark time: %.0f s. Load average (1, 5, 15 min) at the start: %s; at the end: %s "+
		"(other work on the machine shows here, and makes every number noisier).\n\n",
		time.Since(env.started).Seconds(), env.loadStart, loadavg())
	return writeReport(*out, report.String())
}

// writeReport writes report to stdout and, if out is not empty, to the
// file out too.
func writeReport(out, report string) error {
	w := io.Writer(os.Stdout)
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = io.MultiWriter(os.Stdout, f)
	}
	_, err := io.WriteString(w, report)
	return err
}

func footprintTable(env *env, fp map[string]*footprint) (string, []target) {
	t := &table{head: []string{"stack", "stripped binary (MB)", "modules linked", "cold build (s)", "cold build CPU (s)",
		"idle RSS, empty cluster (MB)", fmt.Sprintf("idle RSS, %d ReplicaSets/%d Pods (MB)", env.rssRS, env.rssRS*env.rssPods)}}
	type med struct{ size, mods, build, cpu, empty, pods float64 }
	meds := map[string]med{}
	for _, st := range env.stacks {
		f := fp[st]
		if f == nil {
			continue
		}
		b, c, e, p := summarize(f.coldBuild), summarize(f.coldCPU), summarize(f.rssEmpty), summarize(f.rssPods)
		meds[st] = med{f.sizeMB, float64(f.modules), b.median, c.median, e.median, p.median}
		t.add(st, fmt.Sprintf("%.2f", f.sizeMB), fmt.Sprint(f.modules), b.format(1), c.format(1), e.format(1), p.format(1))
	}
	// kctl-lean (podcount/kctllean) is compared too: podcount with only
	// controller-runtime's program's flags and servers linked.
	for _, mine := range []string{"kctl", "kctl-lean"} {
		for _, other := range []string{"controller-runtime", "client-go", "kctl-base"} {
			k, okK := meds[mine]
			o, okO := meds[other]
			if okK && okO {
				t.add(mine+" / "+other, ratio(k.size, o.size), ratio(k.mods, o.mods), ratio(k.build, o.build), ratio(k.cpu, o.cpu),
					ratio(k.empty, o.empty), ratio(k.pods, o.pods))
			}
		}
	}
	k, okK := meds["kctl"]
	cr, okCR := meds["controller-runtime"]
	ts := []target{
		{"stripped binary size", "<= 14 MB", fmt.Sprintf("%.2f MB", k.size), okK && k.size <= 14, okK},
		{"modules linked", "<= 30", fmt.Sprint(k.mods), okK && k.mods <= 30, okK},
	}
	if f := fp["kctl"]; f == nil || len(f.rssPods) > 0 {
		ts = append(ts, target{"idle RSS with Pods vs controller-runtime", "<= 0.6x", ratio(k.pods, cr.pods),
			okK && okCR && k.pods <= 0.6*cr.pods, okK && okCR && !isNaN(k.pods)})
	}
	return t.String(), ts
}

func isNaN(f float64) bool { return f != f }

// e2eSection runs the end-to-end benchmark at env.qps and at each stack's defaults.
func e2eSection(ctx context.Context, env *env, report *strings.Builder, targets *[]target) error {
	res, err := e2ePhase(ctx, env, env.qps, env.runs)
	if err != nil {
		return err
	}
	tab, med := e2eTable(env, res)
	fmt.Fprintf(report, "### End to end, client QPS %v (burst %v), 2 workers\n\n%d ReplicaSets with %d Pods each (controller owner "+
		"reference) created by 16 harness goroutines while the controller runs; then %d Pod changes/s for %d s (one per ReplicaSet: "+
		"delete a Pod, create a Pod, relabel a Pod out of the selector), latency from the change's request to the label seen by the "+
		"harness's watch; controller CPU (utime+stime) from the first create until it is idle after the churn. A fresh namespace per "+
		"run, one stack at a time, %d alternating runs; median (min–max).\n\n%s\n%s%s",
		env.qps, env.qps, env.e2eRS, env.e2ePods, env.churnRate, env.churnSeconds, env.runs, tab, env.baseNote(), historyNote(env))
	k, okK := med["kctl"]
	if h, ok := med["kctl-history"]; ok && okK {
		*targets = append(*targets, target{"end to end: controller CPU with history on vs off", "<= 1.03x", ratio(h[3], k[3]), h[3] <= 1.03*k[3], true})
	}
	cr, okCR := med["controller-runtime"]
	known := okK && okCR
	*targets = append(*targets,
		target{"end to end: churn p99 vs controller-runtime", "<= 1.0x", ratio(k[2], cr[2]), known && k[2] <= cr[2], known},
		target{"end to end: controller CPU vs controller-runtime", "<= 0.6x", ratio(k[3], cr[3]), known && k[3] <= 0.6*cr[3], known})
	if env.defaultQPSRuns == 0 {
		return nil
	}
	dres, err := e2ePhase(ctx, env, 0, env.defaultQPSRuns)
	if err != nil {
		return err
	}
	dtab, dmed := e2eTable(env, dres)
	fmt.Fprintf(report, "### End to end, each stack's default client limits, 2 workers\n\nThe same, with no --qps flag: "+
		"kctl's default, controller-runtime's GetConfig (v0.24: no client-side limit), client-go's rest.Config (5 QPS, burst 10). "+
		"%d alternating run(s).\n\n%s\n", env.defaultQPSRuns, dtab)
	if dk, ok := dmed["kctl"]; ok && okK {
		// The limiter is not the bottleneck if kctl's defaults settle about as fast as at QPS 500.
		*targets = append(*targets, target{"defaults: kctl's last label after last create, default limits vs QPS 500",
			"<= 1.5x (no limiter bottleneck)", fmt.Sprintf("%.0f ms vs %.0f ms (%s)", dk[0], k[0], ratio(dk[0], k[0])),
			dk[0] <= 1.5*k[0] || dk[0]-k[0] < 200, true})
	}
	return nil
}

// queueSection runs the root module's queue benchmarks and summarises them.
func queueSection(env *env, report *strings.Builder) error {
	args := []string{"test", "-run", "^$", "-bench", "Queue", "-benchmem", "-count", "5", "."}
	cmd := exec.Command("go", args...)
	cmd.Dir = env.repoDir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	// A result line is the name, the iterations, then value-unit pairs
	// (ns/op, custom metrics such as cpu-ns/op, B/op, allocs/op).
	re := regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)
	var names, units []string
	by := map[string]map[string][]float64{}
	for _, l := range strings.Split(string(out), "\n") {
		m := re.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if by[m[1]] == nil {
			by[m[1]] = map[string][]float64{}
			names = append(names, m[1])
		}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			if !slices.Contains(units, f[i+1]) {
				units = append(units, f[i+1])
			}
			by[m[1]][f[i+1]] = append(by[m[1]][f[i+1]], v)
		}
	}
	t := &table{head: append(append([]string{"benchmark"}, units...), "runs")}
	for _, n := range names {
		row := []string{n}
		for _, u := range units {
			s := summarize(by[n][u])
			switch {
			case s.n == 0:
				row = append(row, "")
			case u == "ns/op" || u == "cpu-ns/op":
				row = append(row, s.format(1))
			default:
				row = append(row, strconv.FormatFloat(s.median, 'g', 4, 64))
			}
		}
		t.add(append(row, fmt.Sprint(len(by[n]["ns/op"])))...)
	}
	fmt.Fprintf(report, "### Work queue (root module)\n\n`go %s` in the repository root; median (min–max) of 5 for times, median for the rest.\n\n%s\n<details><summary>raw output</summary>\n\n```\n%s```\n</details>\n\n",
		strings.Join(args, " "), t, out)
	return nil
}

// loadavg is the first three fields of /proc/loadavg.
func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}

// machine describes the machine and the versions.
func machine(env *env) string {
	var b strings.Builder
	cpu := "unknown"
	if info, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := regexp.MustCompile(`(?m)^model name\s*:\s*(.*)$`).FindSubmatch(info); m != nil {
			cpu = string(m[1])
		}
	}
	mem := ""
	if info, err := os.ReadFile("/proc/meminfo"); err == nil {
		if m := regexp.MustCompile(`MemTotal:\s+(\d+) kB`).FindSubmatch(info); m != nil {
			kb, _ := strconv.ParseFloat(string(m[1]), 64)
			mem = fmt.Sprintf("%.1f GB RAM", kb*1024/1e9)
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fmt.Fprintf(&b, "### Machine and versions\n\n- %d CPUs (`nproc`), %s, %s, Linux %s\n", runtime.NumCPU(), cpu, mem, strings.TrimSpace(string(kernel)))
	gover, _ := exec.Command("go", "version").Output()
	fmt.Fprintf(&b, "- %s\n", strings.TrimSpace(string(gover)))
	if env.cs != nil {
		if v, err := env.cs.Discovery().ServerVersion(); err == nil {
			fmt.Fprintf(&b, "- kube-apiserver %s", v.GitVersion)
		}
		if out, err := exec.Command(filepath.Join(env.repoDir, ".cache", "bin", "etcd"), "--version").Output(); err == nil {
			fmt.Fprintf(&b, ", %s", strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0])
		}
		fmt.Fprintf(&b, " (local control plane: no scheduler, no kubelet, no controller-manager)\n")
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		var mods []string
		for _, d := range bi.Deps {
			switch d.Path {
			case "sigs.k8s.io/controller-runtime", "k8s.io/client-go", "k8s.io/api", "k8s.io/apimachinery":
				mods = append(mods, d.Path+" "+d.Version)
			}
		}
		fmt.Fprintf(&b, "- %s; kctl from this checkout (%s)", strings.Join(mods, ", "), gitRev(env.repoDir))
		if env.kctlBase != "" {
			fmt.Fprintf(&b, ", kctl-base from %s (%s)", env.kctlBase, gitRev(env.kctlBase))
		}
		fmt.Fprintf(&b, "\n")
	}
	return b.String()
}

// gitRev names the commit checked out in dir, with "-dirty" for uncommitted changes.
func gitRev(dir string) string {
	out, err := exec.Command("git", "-C", dir, "describe", "--always", "--dirty").Output()
	if err != nil {
		return "commit unknown"
	}
	return "commit " + strings.TrimSpace(string(out))
}
