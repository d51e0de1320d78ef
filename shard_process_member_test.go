package kctl

// A member of the shard group of shard_process_test.go, run as a process
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

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/tools/clientcmd"
)

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
		state := fmt.Sprintf("%d %s %s", releasing, bits, formatRanges(run.weights()))
		if state != last {
			w.write("state %d %s", time.Now().UnixNano(), state)
			last = state
		}
		time.Sleep(10 * time.Millisecond) // a poll; ends with the process
	}
}
