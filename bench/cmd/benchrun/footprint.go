package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// rssNamespace holds the ReplicaSets and Pods of the idle RSS measurement.
const rssNamespace = "bench-rss"

// pkgOf is each stack's podcount package in the bench module.
var pkgOf = map[string]string{
	"kctl":               "./podcount/kctl",
	"controller-runtime": "./podcount/controllerruntime",
	"client-go":          "./podcount/clientgo",
	"kctl-history":       "./podcount/kctl", // run with stackArgs
	"kctl-lean":          "./podcount/kctllean",
}

// stackArgs are the flags a stack's binary gets on top of the common ones:
// kctl-history is kctl with the Manager's per-key reconcile history on
// (Manager.KeepHistory), to measure what keeping it costs.
var stackArgs = map[string][]string{
	"kctl-history": {"--history"},
}

// floors are programs that link only what any podcount binary must: the
// smallest a binary with these parts can be (bench/floor).
var floors = []struct{ name, pkg, what string }{
	{"types", "./floor/types", "decode and copy corev1.Pod and appsv1.ReplicaSet"},
	{"rest", "./floor/rest", "types + an API server HTTP client (client-go rest)"},
	{"clientcmd", "./floor/clientcmd", "rest + kubeconfig loading (client-go tools/clientcmd)"},
	{"request", "./floor/request", "clientcmd + one request sent (net/http's client side, HTTP/2)"},
	{"server", "./floor/server", "request + an HTTP server (metrics, probes)"},
}

// buildFlags are the flags of every build: a stripped release binary.
var buildFlags = []string{"-trimpath", "-ldflags=-s -w"}

// floorTable builds the floors and tells their sizes.
func floorTable(env *env) (string, error) {
	t := &table{head: []string{"floor (bench/floor)", "links", "stripped binary (MB)", "modules linked"}}
	for _, f := range floors {
		bin := filepath.Join(env.binDir, "floor-"+f.name)
		args := append(append([]string{"build"}, buildFlags...), "-o", bin, f.pkg)
		cmd := exec.Command("go", args...)
		cmd.Dir = env.benchDir
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		fi, err := os.Stat(bin)
		if err != nil {
			return "", err
		}
		n, err := modules(bin)
		if err != nil {
			return "", err
		}
		t.add(f.name, f.what, fmt.Sprintf("%.2f", float64(fi.Size())/1e6), fmt.Sprint(n))
	}
	return t.String(), nil
}

// build builds stack's podcount into env.binDir, with extra environment
// variables (e.g. an empty GOCACHE), and returns how long it took and the
// CPU time (user + system) of go and the compilers and linker it ran.
func build(env *env, stack string, extraEnv []string) (wall, cpu time.Duration, err error) {
	dir, pkg := env.benchDir, pkgOf[stack]
	if stack == "kctl-base" {
		dir, pkg = baseBenchDir(env), pkgOf["kctl"]
	}
	args := append([]string{"build"}, buildFlags...)
	args = append(args, "-o", env.bin(stack), pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), extraEnv...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	// wait4 reports the go command's usage including the children it waited for.
	return time.Since(start), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// baseBenchDir is the bench module of the -kctl-base checkout. The stack
// kctl-base is that checkout's own podcount/kctl and sync child, built
// against its kctl: code written for one revision's API may not compile
// against another's (a package moved), so each revision is measured with
// its own bench code. Compare revisions whose bench/podcount/kctl and
// bench/cmd/benchrun/sync_kctl.go differ at most in import paths, or the
// difference measures those files too.
func baseBenchDir(env *env) string { return filepath.Join(env.kctlBase, "bench") }

// modules counts the `dep` lines of `go version -m`: the modules linked in.
func modules(bin string) (int, error) {
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		return 0, err
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 && f[0] == "dep" {
			n++
		}
	}
	return n, nil
}

// footprint is one stack's static and idle numbers.
type footprint struct {
	sizeMB    float64
	modules   int
	coldBuild []float64 // seconds, wall clock
	coldCPU   []float64 // seconds of CPU
	rssEmpty  []float64 // MB
	rssPods   []float64 // MB
}

// buildPhase builds every stack (warm cache) for size and modules, then
// times env.buildRuns cold builds of each, alternating.
func buildPhase(env *env, fp map[string]*footprint) error {
	for _, st := range env.stacks {
		f, err := staticFootprint(env, st)
		if err != nil {
			return err
		}
		fp[st] = f
	}
	for run := range env.buildRuns {
		for _, st := range rotate(env.stacks, run) {
			cache, err := os.MkdirTemp("", "benchrun-gocache-")
			if err != nil {
				return err
			}
			took, cpu, err := build(env, st, []string{"GOCACHE=" + cache})
			os.RemoveAll(cache)
			if err != nil {
				return err
			}
			fp[st].coldBuild = append(fp[st].coldBuild, took.Seconds())
			fp[st].coldCPU = append(fp[st].coldCPU, cpu.Seconds())
			env.progress("cold build run %d %-18s %.1f s (%.1f s of CPU)", run+1, st, took.Seconds(), cpu.Seconds())
		}
	}
	return nil
}

// staticFootprint builds stack (warm cache) and reads its size and modules.
func staticFootprint(env *env, stack string) (*footprint, error) {
	if _, _, err := build(env, stack, nil); err != nil {
		return nil, err
	}
	fi, err := os.Stat(env.bin(stack))
	if err != nil {
		return nil, err
	}
	n, err := modules(env.bin(stack))
	if err != nil {
		return nil, err
	}
	env.progress("build %-18s %.2f MB, %d modules", stack, float64(fi.Size())/1e6, n)
	return &footprint{sizeMB: float64(fi.Size()) / 1e6, modules: n}, nil
}

// rssPhase measures idle RSS after sync: first on an empty cluster, then
// with rssRS ReplicaSets of rssPods Pods each, which every run labels anew.
// Without the footprint part (-skip footprint) it builds the stacks itself.
func rssPhase(ctx context.Context, env *env, fp map[string]*footprint) error {
	for _, st := range env.stacks {
		if fp[st] != nil {
			continue
		}
		f, err := staticFootprint(env, st)
		if err != nil {
			return err
		}
		fp[st] = f
	}
	for run := range env.runs {
		for _, st := range rotate(env.stacks, run) {
			rss, err := idleRSS(ctx, env, st, fmt.Sprintf("rss-empty-%s-%d", st, run), nil)
			if err != nil {
				return err
			}
			fp[st].rssEmpty = append(fp[st].rssEmpty, rss)
			env.progress("idle RSS, empty cluster, run %d %-18s %.1f MB", run+1, st, rss)
		}
	}

	cs := env.cs
	if err := ensureNamespace(ctx, cs, rssNamespace); err != nil {
		return err
	}
	defer clearNamespace(context.WithoutCancel(ctx), cs, rssNamespace)
	env.progress("rss: creating %d ReplicaSets with %d Pods each", env.rssRS, env.rssPods)
	want, err := createIdleFixture(ctx, env, rssNamespace)
	if err != nil {
		return err
	}
	for run := range env.runs {
		for _, st := range rotate(env.stacks, run) {
			err := clearPodCounts(ctx, env, rssNamespace)
			if err != nil {
				return err
			}
			rss, err := idleRSS(ctx, env, st, fmt.Sprintf("rss-pods-%s-%d", st, run), want)
			if err != nil {
				return err
			}
			fp[st].rssPods = append(fp[st].rssPods, rss)
			env.progress("idle RSS, %d ReplicaSets/%d Pods, run %d %-18s %.1f MB", env.rssRS, env.rssRS*env.rssPods, run+1, st, rss)
		}
	}
	return nil
}

// idleRSS starts stack's controller, waits until the labels in want show
// (none: until it synced) and it has used no CPU for 2 s, and reads VmRSS.
func idleRSS(ctx context.Context, env *env, stack, name string, want map[string]string) (float64, error) {
	var w *labelWatch
	var done <-chan struct{}
	if want != nil {
		w = newLabelWatch(env.cs, rssNamespace)
		defer w.close()
		done = w.expect(want)
	}
	args := []string{"--kubeconfig", env.kubeconfig, "--workers", "2", "--qps", fmt.Sprint(env.qps)}
	p, err := startProc(env.bin(stack), filepath.Join(env.logDir, name+".log"), append(args, stackArgs[stack]...)...)
	if err != nil {
		return 0, err
	}
	defer p.stop()
	if done != nil {
		select {
		case <-done:
		case <-time.After(120 * time.Second):
			_, good, _ := w.stats()
			return 0, fmt.Errorf("%s: only %d of %d ReplicaSets labelled after 120 s; see %s", stack, good, len(want), p.log)
		}
	}
	time.Sleep(time.Second) // at least: an empty cluster gives nothing to wait for
	idle, err := waitIdle(p, 2*time.Second, 60*time.Second)
	if err != nil {
		return 0, err
	}
	if !idle {
		env.progress("warning: %s did not go idle within 60 s; RSS read anyway", stack)
	}
	return rssMB(p.pid())
}

// typeCosts are the kctl programs whose binary cost benchrun reports, each
// with its floor: the same types' code (protobuf, JSON, DeepCopy),
// clientcmd, rest and one request sent, without kctl (bench/floor).
//
// podcount is the README's controller calling only the core
// (typecost/podcount): what kctl adds to a controller, and what the
// issue's target is about. benchrun's podcount is podcount/kctl, the
// program the other parts run: it also calls Shard, KeepHistory,
// ServeMetrics and debug.ServePprof behind its flags and writes profiles with
// runtime/pprof, so its row counts those as well.
var typeCosts = []struct{ name, pkg, floor, what string }{
	{"podcount", "./typecost/podcount", "./floor/podcount", "the podcount controller (ReplicaSet, Pod), core only"},
	{"benchrun's podcount", "./podcount/kctl", "./floor/podcount", "podcount/kctl: + Shard, KeepHistory, ServeMetrics, ServePprof, runtime/pprof"},
	{"1 type", "./typecost/one", "./floor/onetype", "a controller of Pods that reads and writes them"},
	{"5 types", "./typecost/five", "./floor/fivetypes", "the same for Pod, ConfigMap, Secret, Service, Deployment"},
}

// typeCostTable builds typeCosts and tells kctl's own cost in each (its
// size less its floor's) and per type past the first: (the cost in 5
// types - in 1 type) / 4, what each type a controller touches adds.
func typeCostTable(env *env) (string, []target, error) {
	t := &table{head: []string{"program", "what", "stripped binary (MB)", "its floor (MB)", "kctl's own cost (MB)"}}
	cost := map[string]float64{}
	for _, p := range typeCosts {
		size, err := strippedSize(env, p.pkg)
		if err != nil {
			return "", nil, err
		}
		floor, err := strippedSize(env, p.floor)
		if err != nil {
			return "", nil, err
		}
		cost[p.name] = size - floor
		t.add(p.name, p.what, fmt.Sprintf("%.2f", size), fmt.Sprintf("%.2f", floor), fmt.Sprintf("%.3f", size-floor))
	}
	perType := (cost["5 types"] - cost["1 type"]) / 4
	t.add("per further type", "(5 types - 1 type) / 4", "", "", fmt.Sprintf("%.3f", perType))
	ts := []target{
		{"binary: kctl's own cost above the floor (podcount)", "<= 0.6 MB", fmt.Sprintf("%.3f MB", cost["podcount"]), cost["podcount"] <= 0.6, true},
		{"binary: kctl's cost per further type", "<= 0.075 MB", fmt.Sprintf("%.3f MB", perType), perType <= 0.075, true},
	}
	return t.String(), ts, nil
}

// strippedSize builds pkg of the bench module as every build is (buildFlags)
// and returns its size in MB.
func strippedSize(env *env, pkg string) (float64, error) {
	name := "typecost-" + strings.ReplaceAll(strings.TrimPrefix(pkg, "./"), "/", "-")
	bin := filepath.Join(env.binDir, name)
	args := append(append([]string{"build"}, buildFlags...), "-o", bin, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = env.benchDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return 0, err
	}
	return float64(fi.Size()) / 1e6, nil
}
