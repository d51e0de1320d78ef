package kctl

// The shard group's churn check with each member a process of its own
// (shardMemberMain, below): a kill is a real SIGKILL, the process
// ends between any two instructions, its Lease is left to expire, its
// in-flight reconciles end with it. The test reads the members' lines
// from their standard output as they come.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kctl-dev/kctl/internal/controlplane"
	"github.com/kctl-dev/kctl/internal/handover"
	"github.com/kctl-dev/kctl/internal/podfixture"
	"github.com/kctl-dev/kctl/internal/shardhash"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// parseInts reads "1,2,3".
func parseInts(s string) []int {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, _ := strconv.Atoi(p)
		out = append(out, n)
	}
	return out
}

// memberProc is one life of a member process: the n-th process of its
// identity. procGroup.mu guards partial, open and states.
type memberProc struct {
	id, life string // life: "<id>#<n>"
	cmd      *exec.Cmd
	log      logBuffer
	exited   chan struct{} // closed once reaped and its lines read
	partial  []byte
	open     map[string]procSpan // started, not ended, by seq
	states   []memberState
}

// memberState is one state line.
type memberState struct {
	at        time.Time
	releasing int
	serving   []bool
	weights   []int
}

// procSpan is one reconcile of a member process, with the churn
// annotation it saw.
type procSpan struct {
	shardSpan
	life, churn string
}

// procGroup runs the member processes of one test and collects their
// lines.
type procGroup struct {
	t          *testing.T
	kubeconfig string
	leaseNS    string
	lives      map[string]int         // processes started, by identity
	live       map[string]*memberProc // running, by identity

	mu     sync.Mutex
	all    []*memberProc
	spans  []procSpan
	byID   *shardLog // member: the identity
	byLife *shardLog // member: the life

	cfg     *rest.Config
	changed chan struct{} // a state line came (buffered: one)
}

// start starts a process of member id.
func (g *procGroup) start(id string) {
	t := g.t
	t.Helper()
	g.lives[id]++
	life := fmt.Sprintf("%s#%d", id, g.lives[id])
	p := &memberProc{id: id, life: life, exited: make(chan struct{}), open: map[string]procSpan{}}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), shardMemberEnv+"="+id,
		shardMemberConfigEnv+"="+g.kubeconfig, shardMemberLeasesEnv+"="+g.leaseNS)
	p.cmd.Stdout = procLines{g, p}
	p.cmd.Stderr = &p.log
	stdin, err := p.cmd.StdinPipe() // the member's lifeline; Wait closes it
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait() // returns once every line is read
		reaped := time.Now()
		g.mu.Lock()
		for _, sp := range p.open {
			sp.end = reaped
			g.add(sp)
		}
		clear(p.open)
		g.mu.Unlock()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill() // an error if it has exited already
		<-p.exited
		stdin.Close()
		if t.Failed() {
			t.Logf("%s's log:\n%s", life, p.log.String())
		}
	})
	g.mu.Lock()
	g.all = append(g.all, p)
	g.mu.Unlock()
	g.live[id] = p
}

// stop sends SIGTERM to member id and waits for it to exit, with status 0
// (Start returned nil after its graceful stop).
func (g *procGroup) stop(id string) {
	t := g.t
	t.Helper()
	p := g.live[id]
	delete(g.live, id)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to %s: %v", p.life, err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still runs 30s after SIGTERM (ShutdownTimeout 10s)", p.life)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("%s exited with status %d after SIGTERM, want 0", p.life, code)
	}
}

// kill sends SIGKILL to member id, waits until it is reaped, and returns
// when it was sent and the ranges the member served by its last state
// line.
func (g *procGroup) kill(id string) (time.Time, []int) {
	t := g.t
	t.Helper()
	p := g.live[id]
	delete(g.live, id)
	var served []int
	g.mu.Lock()
	for r, on := range p.states[len(p.states)-1].serving { // settled: it wrote one
		if on {
			served = append(served, r)
		}
	}
	g.mu.Unlock()
	at := time.Now()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatalf("SIGKILL to %s: %v", p.life, err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s not reaped 10s after SIGKILL", p.life)
	}
	return at, served
}

// procLines takes in a member process's standard output.
type procLines struct {
	g *procGroup
	p *memberProc
}

// Write parses the whole lines of b, keeping the rest for the next.
func (w procLines) Write(b []byte) (int, error) {
	w.g.mu.Lock()
	defer w.g.mu.Unlock()
	buf := append(w.p.partial, b...)
	end := bytes.LastIndexByte(buf, '\n') + 1
	for line := range strings.Lines(string(buf[:end])) {
		w.g.parse(w.p, strings.Fields(line))
	}
	w.p.partial = slices.Clone(buf[end:])
	return len(b), nil
}

// parse takes in one line of p. g.mu is held.
func (g *procGroup) parse(p *memberProc, f []string) {
	at := func(s string) time.Time {
		n, _ := strconv.ParseInt(s, 10, 64)
		return time.Unix(0, n)
	}
	switch {
	case len(f) == 5 && f[0] == "start":
		ns, name, _ := strings.Cut(f[2], "/")
		sp := shardSpan{member: p.id, key: Key{ns, name}, start: at(f[3])}
		p.open[f[1]] = procSpan{shardSpan: sp, life: p.life, churn: f[4]}
	case len(f) == 3 && f[0] == "end":
		sp, ok := p.open[f[1]]
		if !ok {
			g.t.Errorf("%s: end of reconcile %s, never started", p.life, f[1])
			return
		}
		delete(p.open, f[1])
		sp.end = at(f[2])
		g.add(sp)
	case len(f) == 5 && f[0] == "state":
		st := memberState{at: at(f[1]), weights: parseInts(f[4])}
		st.releasing, _ = strconv.Atoi(f[2])
		for _, c := range f[3] {
			st.serving = append(st.serving, c == '1')
		}
		p.states = append(p.states, st)
		select {
		case g.changed <- struct{}{}:
		default: // one wake-up pending is enough
		}
	default:
		g.t.Errorf("%s: a line not understood: %q", p.life, strings.Join(f, " "))
	}
}

// add records an ended reconcile. g.mu is held.
func (g *procGroup) add(sp procSpan) {
	g.spans = append(g.spans, sp)
	g.byID.mu.Lock()
	g.byID.spans = append(g.byID.spans, sp.shardSpan)
	g.byID.mu.Unlock()
	byLife := sp.shardSpan
	byLife.member = sp.life
	g.byLife.mu.Lock()
	g.byLife.spans = append(g.byLife.spans, byLife)
	g.byLife.mu.Unlock()
}

// settle waits until the live members' latest state lines agree on the
// weights of the ranges, and each serves exactly its ranges among them
// and drains none. It only decides when the group has settled, as
// waitServing does: what the test expects of the members comes from
// what they did. It wakes at each state line,
// and gives up once no member's state changed for settleBound (the
// members' LeaseDuration and RenewPeriod, and a relist measured now),
// or after settleCap in all. A member that exits meanwhile fails the
// test.
func (g *procGroup) settle(step string) {
	t := g.t
	t.Helper()
	ids := slices.Sorted(maps.Keys(g.live))
	began := time.Now()
	relist := measureRelist(t, g.cfg)
	bound := settleBound(testShardLease, processShardRenew, relist)
	stalled := time.NewTimer(bound)
	defer stalled.Stop()
	whole := time.NewTimer(settleCap(bound))
	defer whole.Stop()
	for {
		why := g.settled(ids)
		if why == "" {
			t.Logf("%s: %d member processes settled in %v", step, len(ids), time.Since(began).Round(time.Millisecond))
			return
		}
		select {
		case <-g.changed:
			stalled.Reset(bound)
		case <-stalled.C:
			t.Fatalf("%s: members %v did not settle: no state changed for %v (LeaseDuration %v + 3 RenewPeriods %v + 4 relists %v): %s",
				step, ids, bound, testShardLease, processShardRenew, relist.Round(time.Millisecond), why)
		case <-whole.C:
			t.Fatalf("%s: members %v did not settle within %v (10 times %v): %s", step, ids, settleCap(bound), bound, why)
		}
	}
}

// settled returns why the live members ids have not settled on their
// ranges, or "".
func (g *procGroup) settled(ids []string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var w []int
	var owners []string
	for _, id := range ids {
		p := g.live[id]
		select {
		case <-p.exited:
			g.t.Fatalf("%s exited (%v) while it should run", p.life, p.cmd.ProcessState)
		default:
		}
		if len(p.states) == 0 {
			return p.life + " wrote no state yet"
		}
		st := p.states[len(p.states)-1]
		if w == nil {
			w = st.weights
			owners = shardhash.AssignWeighted(ids, w)
		}
		if !slices.Equal(st.weights, w) {
			return p.life + " counts other namespaces per range"
		}
		if st.releasing > 0 {
			return p.life + " drains ranges"
		}
		for r, o := range owners {
			if st.serving[r] != (o == id) {
				return fmt.Sprintf("%s: range %d is %s's, served: %v", p.life, r, o, st.serving[r])
			}
		}
	}
	return ""
}

// servedAgain returns how long after at each of ranges was first
// served by a live member (the longest), and checks that none served it
// at that time.
func (g *procGroup) servedAgain(at time.Time, ranges []int) time.Duration {
	t := g.t
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	var took time.Duration
	for _, r := range ranges {
		first := time.Time{}
		for _, p := range g.live {
			i, _ := slices.BinarySearchFunc(p.states, at, func(st memberState, at time.Time) int { return st.at.Compare(at) })
			if i > 0 && p.states[i-1].serving[r] {
				t.Errorf("%s served range %d when its owner was killed", p.life, r)
			}
			j := slices.IndexFunc(p.states[i:], func(st memberState) bool { return st.serving[r] })
			if j >= 0 && (first.IsZero() || p.states[i+j].at.Before(first)) {
				first = p.states[i+j].at
			}
		}
		if first.IsZero() {
			t.Fatalf("range %d of the killed member is served by no live member", r)
		}
		took = max(took, first.Sub(at))
	}
	return took
}

// unreconciled lists the keys whose last change (the churn annotation
// last[k]) no reconcile of their owner's running process saw; owners
// gives each key's member, as a bump showed it (checkPartition, which
// reported the keys it lacks).
func (g *procGroup) unreconciled(keys []Key, owners map[Key]string, last map[Key]int) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	seen := map[Key]bool{}
	for _, sp := range g.spans {
		p, live := g.live[owners[sp.key]]
		n, ok := last[sp.key]
		if ok && live && sp.life == p.life && sp.churn == strconv.Itoa(n) {
			seen[sp.key] = true
		}
	}
	var missing []string
	for _, k := range keys {
		if _, ok := owners[k]; ok && !seen[k] {
			missing = append(missing, fmt.Sprintf("%s (churn %d)", k, last[k]))
		}
	}
	return missing
}

// The churn check with each member a process: from 1 member to 3, then
// SIGKILLs, graceful stops (SIGTERM) and restarts, 20 changes in all,
// while ReplicaSets change at about 50/s. No key is reconciled by two
// processes at once; each ReplicaSet's last change is reconciled by its
// final owner, the one live process that reconciles it after a bump
// (every key of its namespace too), the same before and after the last
// changes; each live member owns some keys; and after each SIGKILL the survivors serve the killed
// member's ranges within LeaseDuration + RenewPeriod and six of the
// server's round trips, measured then. The small variant (make test)
// makes 6 changes, 1 SIGKILL; make test-scale all 20, 4 SIGKILLs.
func TestShardGroup_ThreeProcesses_SIGKILLChurn(t *testing.T) {
	began := time.Now()
	scale := testShardScale(t)
	cfg := testShardedConfig(t)
	kubeconfig := controlplane.RequireFlags(t, shardGate).Kubeconfig()
	g := &procGroup{
		t: t, kubeconfig: kubeconfig, leaseNS: testNamespace(t, cfg),
		lives: map[string]int{}, live: map[string]*memberProc{},
		byID: &shardLog{}, byLife: &shardLog{},
		cfg: cfg, changed: make(chan struct{}, 1),
	}
	keys := shardFixture(t, cfg, podfixture.Namespaces(60), 2)
	g.start("m-0")
	g.settle("start m-0")

	ch := startChurn(t, cfg, keys)
	var took []time.Duration
	var bound time.Duration
	for _, s := range scale.steps {
		var killedAt time.Time
		var ranges []int
		var slowest func() time.Duration
		switch s.op {
		case "start":
			g.start(s.id)
		case "stop":
			g.stop(s.id)
		case "kill":
			killedAt, ranges = g.kill(s.id)
			slowest = slowestLeaseRoundTrip(t, cfg, g.leaseNS)
		}
		g.settle(s.op + " " + s.id)
		if s.op != "kill" {
			continue
		}
		rtt := slowest()
		// What the survivors do after a SIGKILL besides waiting for the
		// Lease (LeaseDuration) and for a look to judge it expired (one
		// RenewPeriod, which also holds the RenewPeriod/4 before a peer
		// sees the last renewal): a look, a claim, a hurried look and the
		// relist of the ranges gained, and a renewal in flight at the kill
		// that lands late: six requests, each at most as long as the
		// slowest of the Lease GETs made from the kill until the group
		// settled (a fixed margin was met alone, 0.3 s, and missed during
		// the whole suite, 0.66 s; one GET just after the kill, 5 ms, and a
		// takeover 0.49 s over it on a loaded machine).
		d := g.servedAgain(killedAt, ranges)
		took = append(took, d)
		limit := testShardLease + processShardRenew + 6*rtt
		bound = max(bound, limit)
		t.Logf("SIGKILL %s at %s: its %d ranges served again after %v (bound %v: slowest Lease round trip %v)",
			s.id, killedAt.Format(time.StampMicro), len(ranges), d.Round(time.Millisecond), limit.Round(time.Millisecond), rtt.Round(time.Millisecond))
		if d > limit {
			t.Errorf("the ranges of %s were served again %v after its SIGKILL, want at most LeaseDuration + RenewPeriod + 6 of the slowest Lease round trips = %v + %v + 6×%v",
				s.id, d, testShardLease, processShardRenew, rtt)
		}
	}
	// Who owns each key is seen from outside: the member that reconciles
	// it after a bump, made while the churn goes on, so that each key's
	// last change comes after it (a bump reconciled after the churn would
	// show the last change too).
	ids := slices.Sorted(maps.Keys(g.live))
	owners, per := checkPartition(t, cfg, g.byID, keys, ids, "owners")
	t.Logf("after the membership changes: reconciled %v", per)
	checkEachReconciled(t, "owners", ids, per)
	bumped := time.Now()
	eventually(t, "every ReplicaSet changed by the churn after round owners", func() bool { return ch.changedSince(bumped, keys) })
	ch.stop()
	n, rate := ch.made()
	t.Logf("%d changes during the membership changes (%.1f/s)", n, rate)
	last := ch.lastOf()

	deadline := time.Now().Add(30 * time.Second)
	for missing := g.unreconciled(keys, owners, last); len(missing) > 0; missing = g.unreconciled(keys, owners, last) {
		if time.Now().After(deadline) {
			t.Fatalf("30s after the churn, %d ReplicaSets' last change was not reconciled by their owner: %v", len(missing), missing[:min(len(missing), 10)])
		}
		time.Sleep(20 * time.Millisecond) // a poll, bounded by the deadline
	}
	byKey, per := checkPartition(t, cfg, g.byID, keys, ids, "after-churn")
	t.Logf("after the churn: reconciled %v", per)
	for _, k := range keys {
		if owners[k] != "" && byKey[k] != "" && byKey[k] != owners[k] {
			t.Errorf("%s reconciled by %s after the churn, by %s before its last change: the group did not change", k, byKey[k], owners[k])
		}
	}
	if bad := g.byLife.overlaps(); len(bad) > 0 {
		t.Errorf("%d keys reconciled by two processes at once:\n%s", len(bad), strings.Join(bad[:min(len(bad), 10)], "\n"))
	}
	slices.Sort(took)
	g.mu.Lock()
	t.Logf("%d reconciles by %d processes; SIGKILL to served again: min %v, median %v, max %v (largest bound %v); the test took %v",
		len(g.spans), len(g.all), took[0].Round(time.Millisecond), took[len(took)/2].Round(time.Millisecond),
		took[len(took)-1].Round(time.Millisecond), bound, time.Since(began).Round(time.Second))
	g.mu.Unlock()
}

// A member of the shard group of this file, run as a process
// of its own: this test binary, run again with shardMemberEnv set
// (TestMain runs shardMemberMain instead of the tests).
//
// A member writes one line per event to its standard output, a pipe,
// each with one write(2) and no buffer, so a SIGKILL loses at most the
// end of the reconciles in flight (the test takes them to end when the
// process was reaped):
//
//	start <seq> <namespace>/<name> <unixnano> <churn annotation or ->
//	end <seq> <unixnano>
//	state <unixnano> <ranges draining> <served: 0 or 1 per range> <weights>
//
// A state line is written when what the member serves, drains or counts
// per range changes, seen by a poll every 10 ms: a range is served at
// most 10 ms before its line says so.

// shardMemberEnv, set to an identity, makes this test binary a member
// process of the group "podcount" (see TestMain). The member reads the
// other environment variables below.
const (
	shardMemberEnv       = "KCTL_SHARD_MEMBER"
	shardMemberConfigEnv = "KCTL_SHARD_MEMBER_KUBECONFIG"
	shardMemberLeasesEnv = "KCTL_SHARD_MEMBER_LEASES" // the Leases' namespace
)

// processShardRenew is the members' RenewPeriod; their Lease is the
// other shard tests' (testShardLease). The bound checked after a
// SIGKILL is LeaseDuration + RenewPeriod plus six of the server's round
// trips measured at the kill (TestShardGroup_ThreeProcesses_SIGKILLChurn
// says which): the requests took up to 300 ms alone under -race on
// this 2-core machine, and 660 ms during the whole suite, so no fixed
// margin holds both. With testShardRenew (0.3 s) 1 kill of 16 was over
// LeaseDuration + RenewPeriod even alone.
const processShardRenew = time.Second

// shardMemberMain runs member id until SIGTERM (a graceful stop) or
// SIGKILL, and returns the exit code. It also exits, at once and as if
// killed, when its standard input closes: the test that started it is
// gone.
func shardMemberMain(id string) int {
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv(shardMemberConfigEnv))
	var mgr *Manager
	if err == nil {
		cfg.QPS = 100
		cfg.Burst = 200
		logger := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("member", id)
		mgr, err = NewManager(Options{Config: cfg, Logger: logger, ShutdownTimeout: 10 * time.Second})
	}
	w := &memberLines{f: os.Stdout}
	var run *shardRun
	if err == nil {
		NewController(mgr, "podcount", w.reconcile).MaxConcurrentReconciles(4)
		run, err = mgr.shard(ShardOptions{
			Group: "podcount", Namespace: os.Getenv(shardMemberLeasesEnv), Identity: id, Ranges: testShardRanges,
			LeaseDuration: testShardLease, RenewDeadline: 3 * testShardLease / 4, RenewPeriod: processShardRenew,
		})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	go w.report(run)
	if err := mgr.Start(SignalContext()); err != nil {
		fmt.Fprintln(os.Stderr, "Start:", err)
		return 1
	}
	return 0
}

// memberLines writes a member process's lines; seq numbers its
// reconciles.
type memberLines struct {
	f   *os.File
	seq atomic.Int64
}

// write writes one line with one write(2).
func (w *memberLines) write(format string, args ...any) {
	w.f.WriteString(fmt.Sprintf(format, args...) + "\n")
}

// reconcile records its start (with the churn annotation it sees) and
// end, and works 2 ms between, as shardLog.reconcile does.
func (w *memberLines) reconcile(ctx context.Context, rs *appsv1.ReplicaSet) (Result, error) {
	seq := w.seq.Add(1)
	churn := rs.Annotations["churn"]
	if churn == "" {
		churn = "-"
	}
	w.write("start %d %s/%s %d %s", seq, rs.Namespace, rs.Name, time.Now().UnixNano(), churn)
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Millisecond): // the reconcile's work
	}
	w.write("end %d %d", seq, time.Now().UnixNano())
	return Result{}, nil
}

// report writes a state line whenever what run serves, drains or
// weighs changes, polling every 10 ms until the process ends.
func (w *memberLines) report(run *shardRun) {
	last := ""
	for {
		var bits []byte
		run.mu.RLock()
		for _, on := range run.serving {
			b := byte('0')
			if on {
				b = '1'
			}
			bits = append(bits, b)
		}
		releasing := run.releasing
		run.mu.RUnlock()
		state := fmt.Sprintf("%d %s %s", releasing, bits, handover.Format(run.weights()))
		if state != last {
			w.write("state %d %s", time.Now().UnixNano(), state)
			last = state
		}
		time.Sleep(10 * time.Millisecond) // a poll; ends with the process
	}
}
