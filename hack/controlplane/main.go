// Command controlplane builds, starts and stops a local Kubernetes control plane
// (etcd and kube-apiserver, no nodes; kube-controller-manager when asked) around a command:
// kctl's demo and benchmarks, or anything that wants a KUBECONFIG. Go tests
// need not use it: package kctltest starts a control plane inside the test
// binary. From a kctl checkout (elsewhere: go run github.com/kctl-dev/kctl/hack/controlplane):
//
//	go run ./hack/controlplane build                # etcd, kube-apiserver, kubectl; prints their folder
//	go run ./hack/controlplane build -controller-manager  # and kube-controller-manager
//	go run ./hack/controlplane run -- go test ./... # start, run the command, stop
//	go run ./hack/controlplane start -dir DIR       # start in the background: DIR/kubeconfig, DIR/env
//	go run ./hack/controlplane stop -dir DIR        # stop it and remove DIR
//
// run and start take -apiserver-flag, once per extra kube-apiserver flag,
// e.g. the feature gate sharding's server-side selector needs (bench's
// benchrun shard):
//
//	go run ./hack/controlplane run -apiserver-flag=--feature-gates=ShardedListAndWatch=true -- CMD
//
// The binaries are built with the Go module proxy (nothing else is downloaded)
// into the per-user cache, os.UserCacheDir()/kctl/..., once per version, and
// shared with kctltest; build prints that folder. KCTL_CONTROLPLANE_BIN, when
// set, is a folder holding them to use instead. run gives its command these
// variables:
//
//	KUBECONFIG, KCTL_TEST_KUBECONFIG     admin kubeconfig (group system:masters)
//	KCTL_TEST_UNPRIVILEGED_KUBECONFIG    user "kctl-unprivileged", no RBAC rights
//	KCTL_TEST_ETCD_URL                   etcd's client URL (its JSON gateway serves /v3/kv/compaction)
//	KCTL_TEST_CONTROL_URL                POST /restart-apiserver restarts kube-apiserver on the same port
//
// run and start take -controller-manager too: it starts kube-controller-manager
// with only its garbage collector and namespace controller (owner references
// cascade, a deleted namespace empties and goes; no other controller acts).
// Without it there is no controller-manager: namespaces are never finalized and
// nothing is garbage-collected, so give every test a fresh namespace and never
// wait for a cascade.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kctl-dev/kctl/internal/controlplane"
)

const usage = `usage: go run ./hack/controlplane COMMAND
  build [-controller-manager]             build etcd, kube-apiserver and kubectl if need be (and
                                          kube-controller-manager), print their folder
  run [-kubeconfig-out FILE] [-apiserver-flag F]... [-controller-manager] -- CMD ARGS
                                          start a control plane, run CMD against it, stop it
  start -dir DIR [-apiserver-flag F]... [-controller-manager]
                                          start a control plane in the background in DIR (must be new or empty)
  stop -dir DIR                           stop the control plane started in DIR and remove DIR
-apiserver-flag F adds F to kube-apiserver's command line (after kctl's own), once per flag, e.g.
  -apiserver-flag=--feature-gates=ShardedListAndWatch=true   (sharding's server-side selector)
-controller-manager also runs kube-controller-manager's garbage collector and namespace controller`

// apiFlags collects the repeated -apiserver-flag values.
type apiFlags []string

func (f *apiFlags) String() string { return strings.Join(*f, " ") }

func (f *apiFlags) Set(v string) error {
	if !strings.HasPrefix(v, "--") {
		return fmt.Errorf("%q is not a kube-apiserver flag: give it with its dashes, e.g. --feature-gates=ShardedListAndWatch=true", v)
	}
	*f = append(*f, v)
	return nil
}

const apiFlagHelp = "an extra kube-apiserver flag, e.g. --feature-gates=ShardedListAndWatch=true; repeat for more"

const kcmHelp = "also run kube-controller-manager (garbage collection and namespace deletion only), built on first use"

// binaries returns the folder of the control plane's binaries, building
// them, and kube-controller-manager if kcm, if need be.
func binaries(ctx context.Context, kcm bool) (string, error) {
	bin, err := controlplane.Binaries(ctx, os.Stderr)
	if err == nil && kcm {
		_, err = controlplane.ControllerManager(ctx, os.Stderr)
	}
	return bin, err
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	var code int
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "build":
		fs := flag.NewFlagSet("build", flag.ExitOnError)
		kcm := fs.Bool("controller-manager", false, "also build kube-controller-manager")
		fs.Parse(args)
		bin, err := binaries(context.Background(), *kcm)
		if err != nil {
			code = fail(err)
		} else {
			fmt.Println(bin)
		}
	case "run":
		code = runCommand(args)
	case "start":
		if err := startBackground(args); err != nil {
			code = fail(err)
		}
	case "stop":
		if err := stopBackground(args); err != nil {
			code = fail(err)
		}
	default:
		fmt.Fprintln(os.Stderr, usage)
		code = 2
	}
	os.Exit(code)
}

// fail reports err and returns exit code 1.
func fail(err error) int {
	fmt.Fprintf(os.Stderr, "controlplane: %v\n", err)
	return 1
}

// runCommand starts a control plane in a temporary folder, runs the command
// after "--" against it, stops the control plane, and returns the command's
// exit code. SIGINT and SIGTERM are passed on to the command; the control
// plane is stopped once it exits. If this process is killed, the kernel kills
// etcd and kube-apiserver (Pdeathsig).
func runCommand(args []string) int {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	kubeconfigOut := fs.String("kubeconfig-out", "", "also write the admin kubeconfig to this file (left behind)")
	var extra apiFlags
	fs.Var(&extra, "apiserver-flag", apiFlagHelp)
	kcm := fs.Bool("controller-manager", false, kcmHelp)
	fs.Parse(args)
	if fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, usage)
		return 2
	}
	// Until the command runs, a signal cancels ctx: building and starting stop.
	// Later, sigs gets the signals to pass on.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	ctx, stopNotify := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stopNotify()

	bin, err := binaries(ctx, *kcm)
	if err != nil {
		return fail(err)
	}
	controlplane.RemoveStale()
	dir, err := os.MkdirTemp("", "kctl-controlplane-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	c := &controlplane.Cluster{Dir: dir, Bin: bin, Log: os.Stderr, APIFlags: extra, ControllerManager: *kcm}
	defer c.Down()
	err = os.WriteFile(filepath.Join(dir, "runner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
	if err == nil {
		err = c.Up(ctx)
	}
	if err == nil && *kubeconfigOut != "" {
		err = c.WriteKubeconfig(*kubeconfigOut)
	}
	if err != nil {
		return fail(err)
	}

	// The control endpoint: tests restart kube-apiserver through it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /restart-apiserver", func(w http.ResponseWriter, r *http.Request) {
		if err := c.RestartAPIServer(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "kube-apiserver restarted")
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close() // before c.down: deferred calls run last-in first-out

	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), c.Env()...)
	cmd.Env = append(cmd.Env, "KCTL_TEST_CONTROL_URL=http://"+ln.Addr().String())
	// Its own process group, so a signal reaches the command's children too (go test's test binary).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if ctx.Err() != nil {
		return fail(errors.New("interrupted"))
	}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	for running := true; running; {
		select {
		case s := <-sigs:
			forward(cmd.Process.Pid, s.(syscall.Signal))
		case <-exited:
			running = false
		}
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// forward sends s to the process group of pid, and SIGKILL if it still runs 10 s later.
func forward(pid int, s syscall.Signal) {
	syscall.Kill(-pid, s)
	time.AfterFunc(10*time.Second, func() { syscall.Kill(-pid, syscall.SIGKILL) })
}

// startBackground starts a control plane whose processes outlive this one,
// and writes DIR/kubeconfig, DIR/unprivileged.kubeconfig, DIR/env and DIR/pids.
func startBackground(args []string) error {
	fs := flag.NewFlagSet("start", flag.ExitOnError)
	dir := fs.String("dir", "", "folder for the control plane's files; created, must be new or empty")
	var extra apiFlags
	fs.Var(&extra, "apiserver-flag", apiFlagHelp)
	kcm := fs.Bool("controller-manager", false, kcmHelp)
	fs.Parse(args)
	if *dir == "" {
		return errors.New("start needs -dir DIR")
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	if entries, _ := os.ReadDir(abs); len(entries) > 0 {
		return fmt.Errorf("%s is not empty: stop the control plane there with `stop -dir %s`, or pick another folder", abs, *dir)
	}
	bin, err := binaries(context.Background(), *kcm)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	ctx, stopNotify := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stopNotify()
	c := &controlplane.Cluster{Dir: abs, Bin: bin, Detach: true, Log: os.Stderr, APIFlags: extra, ControllerManager: *kcm}
	if err := c.Up(ctx); err != nil {
		c.Down()
		os.RemoveAll(abs)
		return err
	}
	pids := ""
	for _, pid := range c.PIDs() {
		pids += strconv.Itoa(pid) + "\n"
	}
	env := ""
	for _, kv := range c.Env() {
		env += "export " + kv + "\n"
	}
	if err := errors.Join(os.WriteFile(filepath.Join(abs, "pids"), []byte(pids), 0o644),
		os.WriteFile(filepath.Join(abs, "env"), []byte(env), 0o644)); err != nil {
		return err
	}
	fmt.Printf("control plane running; use it with:\n  export KUBECONFIG=%s\n  . %s/env  # for kctl's tests\n"+
		"stop it with:\n  go run ./hack/controlplane stop -dir %s\n", c.Kubeconfig(), abs, *dir)
	return nil
}

// stopBackground stops the processes listed in DIR/pids and removes DIR.
func stopBackground(args []string) error {
	fs := flag.NewFlagSet("stop", flag.ExitOnError)
	dir := fs.String("dir", "", "the folder given to start")
	fs.Parse(args)
	abs, err := filepath.Abs(*dir)
	if err != nil || *dir == "" {
		return errors.New("stop needs -dir DIR, the folder given to start")
	}
	pids, err := os.ReadFile(filepath.Join(abs, "pids"))
	if err != nil {
		return fmt.Errorf("no control plane to stop in %s: %w", abs, err)
	}
	for _, f := range strings.Fields(string(pids)) {
		var pid int
		fmt.Sscan(f, &pid)
		// Only a process whose command line names DIR is ours: the PID may have been reused.
		if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil &&
			strings.Contains(string(cmdline), abs) {
			controlplane.StopPID(pid, func() bool { return !controlplane.Alive(pid) }, 5*time.Second)
		}
	}
	return os.RemoveAll(abs)
}
