package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// probeNamespace holds the ReplicaSets and Pods of the rss-probe part.
const probeNamespace = "bench-rss-probe"

// probeResult is where one idle controller's RSS goes.
type probeResult struct {
	rss, anon, file float64 // MB: VmRSS, and smaps_rollup's Anonymous and the rest (file pages: the binary)
	live, goal      float64 // MB: the Go heap marked live by the last collection, and the next goal (gctrace)
	stacks, gcs     float64 // MB of goroutine stacks at the last collection; collections so far
}

// probeVariants are the runtime settings rss-probe compares (-probe-variants).
var probeVariants = map[string][]string{
	"default":          nil,
	"madvdontneed=0":   {"GODEBUG=madvdontneed=0"}, // MADV_FREE: the kernel takes freed pages back only under pressure
	"GOGC=50":          {"GOGC=50"},
	"GOGC=25":          {"GOGC=25"},
	"GOMEMLIMIT=24MiB": {"GOMEMLIMIT=24MiB"},
}

// probeSection is `benchrun rss-probe`: the idle RSS of each stack with
// rssRS ReplicaSets of rssPods Pods, as the rss part measures it, split
// into the binary's file pages and anonymous memory, with the Go heap's
// own figures from the runtime's GC trace, under each of variants.
func probeSection(ctx context.Context, env *env, variants []string, report *strings.Builder) error {
	for _, st := range env.stacks {
		if _, _, err := build(env, st, nil); err != nil {
			return err
		}
	}
	cs := env.cs
	if err := ensureNamespace(ctx, cs, probeNamespace); err != nil {
		return err
	}
	defer clearNamespace(context.WithoutCancel(ctx), cs, probeNamespace)
	env.progress("rss-probe: creating %d ReplicaSets with %d Pods each", env.rssRS, env.rssPods)
	want, err := createIdleFixture(ctx, env, probeNamespace)
	if err != nil {
		return err
	}
	type row struct{ stack, variant string }
	var rows []row
	for _, st := range env.stacks {
		for _, v := range variants {
			if _, ok := probeVariants[v]; !ok {
				return fmt.Errorf("unknown -probe-variants entry %q", v)
			}
			rows = append(rows, row{st, v})
		}
	}
	res := map[row][]probeResult{}
	for run := range env.runs {
		for i := range rows {
			r := rows[(i+run)%len(rows)]
			err := clearPodCounts(ctx, env, probeNamespace)
			if err != nil {
				return err
			}
			p, err := probeOnce(env, r.stack, r.variant, run, want)
			if err != nil {
				return err
			}
			env.progress("rss-probe run %d %-18s %-16s RSS %.1f MB (anon %.1f, file %.1f), heap live %.1f goal %.1f MB, %v GCs",
				run+1, r.stack, r.variant, p.rss, p.anon, p.file, p.live, p.goal, p.gcs)
			res[r] = append(res[r], p)
		}
	}
	t := &table{head: []string{"stack", "runtime setting", "idle RSS (MB)", "anonymous (MB)", "file pages (MB)",
		"heap live at last GC (MiB)", "heap goal (MiB)", "stacks (MiB)", "GCs", "runs"}}
	for _, r := range rows {
		var rss, anon, file, live, goal, stk, gcs []float64
		for _, p := range res[r] {
			rss, anon, file = append(rss, p.rss), append(anon, p.anon), append(file, p.file)
			live, goal, stk, gcs = append(live, p.live), append(goal, p.goal), append(stk, p.stacks), append(gcs, p.gcs)
		}
		t.add(r.stack, r.variant, summarize(rss).format(1), summarize(anon).format(1), summarize(file).format(1),
			summarize(live).format(1), summarize(goal).format(1), summarize(stk).format(1), summarize(gcs).format(0), fmt.Sprint(len(rss)))
	}
	fmt.Fprintf(report, "### Where idle RSS goes, %d ReplicaSets/%d Pods\n\nEach stack's controller, as the rss part runs it "+
		"(--workers 2 --qps %v), with GODEBUG=gctrace=1 and the runtime setting named, once every ReplicaSet is labelled and "+
		"it has used no CPU for 2 s: VmRSS; /proc/PID/smaps_rollup's Anonymous, and the rest of RSS (file pages: the binary's "+
		"code and read-only data); the heap the last collection marked live, the goal of the next and the goroutine stacks, "+
		"from the last gctrace line (MiB, 2^20 bytes). %d alternating runs; median (min–max).\n\n%s\n",
		env.rssRS, env.rssRS*env.rssPods, env.qps, env.runs, t)
	return nil
}

// probeOnce runs stack with variant's settings until it is idle after
// labelling want, and reads where its RSS goes.
func probeOnce(env *env, stack, variant string, run int, want map[string]string) (probeResult, error) {
	var res probeResult
	w := newLabelWatch(env.cs, probeNamespace)
	defer w.close()
	done := w.expect(want)
	args := []string{"--kubeconfig", env.kubeconfig, "--workers", "2", "--qps", fmt.Sprint(env.qps)}
	extra := append([]string{"GODEBUG=gctrace=1"}, probeVariants[variant]...)
	if len(extra) > 1 && strings.HasPrefix(extra[1], "GODEBUG=") {
		extra = []string{"GODEBUG=gctrace=1," + strings.TrimPrefix(extra[1], "GODEBUG=")}
	}
	name := fmt.Sprintf("rss-probe-%s-%s-%d", stack, strings.NewReplacer("=", "", "/", "").Replace(variant), run)
	log := filepath.Join(env.logDir, name+".log")
	p, err := startProcEnv(env.bin(stack), log, extra, append(args, stackArgs[stack]...)...)
	if err != nil {
		return res, err
	}
	defer p.stop()
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		_, good, _ := w.stats()
		return res, fmt.Errorf("%s: only %d of %d ReplicaSets labelled after 120 s; see %s", stack, good, len(want), p.log)
	}
	time.Sleep(time.Second)
	idle, err := waitIdle(p, 2*time.Second, 60*time.Second)
	if err != nil {
		return res, err
	}
	if !idle {
		env.progress("warning: %s did not go idle within 60 s; RSS read anyway", stack)
	}
	if res.rss, err = rssMB(p.pid()); err != nil {
		return res, err
	}
	roll, err := smapsRollup(p.pid())
	if err != nil {
		return res, err
	}
	res.anon = roll["Anonymous"]
	res.file = roll["Rss"] - roll["Anonymous"] - roll["Shmem"]
	b, err := os.ReadFile(log)
	if err != nil {
		return res, err
	}
	res.live, res.goal, res.stacks, res.gcs = lastGCTrace(string(b))
	return res, nil
}

// smapsRollup reads /proc/PID/smaps_rollup's kB fields, in MB (10^6 bytes).
func smapsRollup(pid int) (map[string]float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[2] == "kB" {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err == nil {
				out[strings.TrimSuffix(f[0], ":")] = kb * 1024 / 1e6
			}
		}
	}
	return out, nil
}

// gcTrace matches a gctrace line: "gc N @...: ... A->B->C MB, D MB goal, E MB stacks".
var gcTrace = regexp.MustCompile(`(?m)^gc (\d+) @.*?(\d+)->(\d+)->(\d+) MB, (\d+) MB goal, (\d+) MB stacks`)

// lastGCTrace is the last collection's live heap, goal and stacks (MiB),
// and its number; NaN if the log has none.
func lastGCTrace(log string) (live, goal, stacks, n float64) {
	all := gcTrace.FindAllStringSubmatch(log, -1)
	if len(all) == 0 {
		nan := func() float64 { var z float64; return z / z }()
		return nan, nan, nan, 0
	}
	m := all[len(all)-1]
	f := func(i int) float64 { v, _ := strconv.ParseFloat(m[i], 64); return v }
	return f(4), f(5), f(6), f(1)
}
