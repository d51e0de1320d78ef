package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// e2eResult is one stack's run of the end-to-end benchmark.
type e2eResult struct {
	settle   time.Duration // last create to every ReplicaSet labelled
	total    time.Duration // first create to every ReplicaSet labelled
	lat      []float64     // churn: change to label, ms
	missing  int           // churn changes whose label never showed
	cpu      float64       // controller CPU seconds over the burst and the churn
	writes   int           // ReplicaSet updates seen (the controller's writes)
	timedOut bool
}

// e2eRun runs one stack once in a fresh namespace: a burst of e2eRS
// ReplicaSets with their Pods, then a churn of Pod changes. qps 0 keeps the
// stack's default client limits.
func e2eRun(ctx context.Context, env *env, stack string, run int, qps float64) (e2eResult, error) {
	var res e2eResult
	mode := "default"
	if qps > 0 {
		mode = "qps" + strconv.Itoa(int(qps))
	}
	ns := fmt.Sprintf("e2e-%s-%s-%d", stack, mode, run)
	cs := env.cs
	if err := ensureNamespace(ctx, cs, ns); err != nil {
		return res, err
	}
	defer clearNamespace(context.WithoutCancel(ctx), cs, ns)
	w := newLabelWatch(cs, ns)
	defer w.close()

	args := []string{"--kubeconfig", env.kubeconfig, "--workers", "2"}
	args = append(args, stackArgs[stack]...)
	if qps > 0 {
		args = append(args, "--qps", fmt.Sprint(qps))
	}
	if env.profileDir != "" {
		args = append(args, "--cpuprofile", filepath.Join(env.profileDir, ns+".pprof"))
		if env.profileHz > 0 && pkgOf[stack] == pkgOf["kctl"] {
			args = append(args, "--cpuprofile-hz", fmt.Sprint(env.profileHz),
				"--memprofile", filepath.Join(env.profileDir, ns+".allocs.pprof"))
		}
	}
	p, err := startProc(env.bin(stack), filepath.Join(env.logDir, ns+".log"), args...)
	if err != nil {
		return res, err
	}
	defer p.stop()
	if _, err := waitIdle(p, time.Second, 60*time.Second); err != nil { // synced on an empty cluster
		return res, err
	}
	cpu0, err := cpuSeconds(p.pid())
	if err != nil {
		return res, err
	}
	limit := 120 * time.Second
	if qps == 0 {
		limit = 600 * time.Second // a 5 QPS client needs minutes
	}

	// Burst: every ReplicaSet and its Pods, 16 at a time.
	want := map[string]string{}
	rsName := func(i int) string { return fmt.Sprintf("rs-%d", i) }
	for i := range env.e2eRS {
		want[rsName(i)] = strconv.Itoa(env.e2ePods)
	}
	done := w.expect(want)
	rsets := make([]*appsv1.ReplicaSet, env.e2eRS)
	first := time.Now()
	err = parallel(env.e2eRS, 16, func(i int) error {
		rs, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, replicaSet(ns, rsName(i), int32(env.e2ePods)), metav1.CreateOptions{FieldManager: fieldManager})
		if err != nil {
			return err
		}
		rsets[i] = rs
		for j := range env.e2ePods {
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, ownedPod(rs, fmt.Sprintf("%s-p%d", rs.Name, j)), metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	last := time.Now()
	select {
	case <-done:
	case <-time.After(limit):
		res.timedOut = true
		_, good, _ := w.stats()
		return res, fmt.Errorf("%s: only %d of %d ReplicaSets labelled %s after %v", stack, good, env.e2eRS, limit, time.Since(last))
	}
	goodAt, _, _ := w.stats()
	res.settle, res.total = goodAt.Sub(last), goodAt.Sub(first)

	// Churn: churnRate changes a second on distinct ReplicaSets, cycling through
	// delete a Pod (count-1), create a Pod (count+1) and relabel a Pod out of
	// the selector (count-1).
	type change struct {
		rs, want string
		at       time.Time
	}
	n := min(env.churnRate*env.churnSeconds, env.e2eRS)
	order := rand.New(rand.NewPCG(1, uint64(run))).Perm(env.e2eRS)[:n]
	changes := make([]change, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var churnErr error
	tick := time.NewTicker(time.Second / time.Duration(env.churnRate))
	for k, idx := range order {
		<-tick.C
		wg.Go(func() {
			rs := rsets[idx]
			at := time.Now()
			var err error
			var v int
			switch k % 3 {
			case 0:
				err = cs.CoreV1().Pods(ns).Delete(ctx, rs.Name+"-p0", metav1.DeleteOptions{})
				v = env.e2ePods - 1
			case 1:
				_, err = cs.CoreV1().Pods(ns).Create(ctx, ownedPod(rs, rs.Name+"-extra"), metav1.CreateOptions{FieldManager: fieldManager})
				v = env.e2ePods + 1
			case 2:
				patch := fmt.Sprintf(`{"metadata":{"labels":{"app":%q}}}`, rs.Name+"-moved")
				_, err = cs.CoreV1().Pods(ns).Patch(ctx, rs.Name+"-p1", types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: fieldManager})
				v = env.e2ePods - 1
			}
			mu.Lock()
			if err != nil && churnErr == nil {
				churnErr = err
			}
			changes[k] = change{rs.Name, strconv.Itoa(v), at}
			mu.Unlock()
		})
	}
	tick.Stop()
	wg.Wait()
	if churnErr != nil {
		return res, churnErr
	}
	want = map[string]string{}
	for _, c := range changes {
		want[c.rs] = c.want
	}
	select {
	case <-w.expect(want):
	case <-time.After(limit):
		res.timedOut = true
	}
	for _, c := range changes {
		at, ok := w.firstAfter(c.rs, c.want, c.at)
		if !ok {
			res.missing++
			continue
		}
		res.lat = append(res.lat, float64(at.Sub(c.at))/1e6)
	}
	if _, err := waitIdle(p, time.Second, 30*time.Second); err != nil {
		return res, err
	}
	cpu1, err := cpuSeconds(p.pid())
	if err != nil {
		return res, err
	}
	res.cpu = cpu1 - cpu0
	_, _, res.writes = w.stats()
	return res, nil
}

// e2ePhase runs every stack runs times, alternating, at the given QPS (0: defaults).
func e2ePhase(ctx context.Context, env *env, qps float64, runs int) (map[string][]e2eResult, error) {
	out := map[string][]e2eResult{}
	for run := range runs {
		for _, st := range rotate(env.stacks, run) {
			r, err := e2eRun(ctx, env, st, run, qps)
			if err != nil {
				return out, err
			}
			env.progress("e2e qps=%v run %d %-18s settle %4.0f ms, churn p50 %4.0f p99 %5.0f ms (missing %d), cpu %.2f s, writes %d",
				qps, run+1, st, ms(r.settle), percentile(r.lat, 50), percentile(r.lat, 99), r.missing, r.cpu, r.writes)
			out[st] = append(out[st], r)
		}
	}
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func e2eTable(env *env, res map[string][]e2eResult) (string, map[string][5]float64) {
	t := &table{head: []string{"stack", "last create → all labelled (ms)", "first create → all labelled (s)",
		"churn p50 (ms)", "churn p99 (ms)", "controller CPU (s)", "label writes", "runs"}}
	med := map[string][5]float64{}
	sums := map[string][]summary{}
	for _, st := range env.stacks {
		rs := res[st]
		if len(rs) == 0 {
			continue
		}
		var settle, total, p50, p99, cpu, writes []float64
		missing := 0
		for _, r := range rs {
			settle, total = append(settle, ms(r.settle)), append(total, r.total.Seconds())
			p50, p99 = append(p50, percentile(r.lat, 50)), append(p99, percentile(r.lat, 99))
			cpu, writes = append(cpu, r.cpu), append(writes, float64(r.writes))
			missing += r.missing
		}
		s, to, a, b, c, wr := summarize(settle), summarize(total), summarize(p50), summarize(p99), summarize(cpu), summarize(writes)
		med[st] = [5]float64{s.median, a.median, b.median, c.median, to.median}
		sums[st] = []summary{s, to, a, b, c}
		note := fmt.Sprint(s.n)
		if missing > 0 {
			note += fmt.Sprintf(" (%d churn labels never seen)", missing)
		}
		t.add(st, s.format(0), to.format(2), a.format(0), b.format(0), c.format(2), wr.format(0), note)
	}
	for _, other := range []string{"controller-runtime", "client-go"} {
		k, okK := med["kctl"]
		o, okO := med[other]
		if !okK || !okO {
			continue
		}
		t.add("kctl / "+other, ratio(k[0], o[0]), ratio(k[4], o[4]), ratio(k[1], o[1]), ratio(k[2], o[2]), ratio(k[3], o[3]), "", "")
	}
	if k, b := sums["kctl"], sums["kctl-base"]; k != nil && b != nil {
		row := []string{"kctl / kctl-base"}
		for i := range k {
			row = append(row, versus(k[i], b[i]))
		}
		t.add(append(row, "", "")...)
	}
	if h, k := sums["kctl-history"], sums["kctl"]; h != nil && k != nil {
		row := []string{"kctl-history / kctl"}
		for i := range h {
			row = append(row, versus(h[i], k[i]))
		}
		t.add(append(row, "", "")...)
	}
	return t.String(), med
}
