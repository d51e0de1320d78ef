// Command controlplane builds, starts and stops a local Kubernetes control plane
// (etcd and kube-apiserver, no controller-manager, no nodes) for kctl's tests,
// its demo, and tests of your own controllers. Run it from a kctl checkout:
//
//	go run ./hack/controlplane build                # etcd, kube-apiserver, kubectl into .cache/bin
//	go run ./hack/controlplane run -- go test ./... # start, run the command, stop
//	go run ./hack/controlplane start -dir DIR       # start in the background: DIR/kubeconfig, DIR/env
//	go run ./hack/controlplane stop -dir DIR        # stop it and remove DIR
//
// The binaries are built from the hack/tools module with the Go module proxy;
// nothing else is downloaded. Elsewhere than in a kctl checkout, set
// KCTL_CONTROLPLANE_BIN to a folder holding etcd and kube-apiserver (a
// checkout's .cache/bin). run gives its command these variables:
//
//	KUBECONFIG, KCTL_TEST_KUBECONFIG     admin kubeconfig (group system:masters)
//	KCTL_TEST_UNPRIVILEGED_KUBECONFIG    user "kctl-unprivileged", no RBAC rights
//	KCTL_TEST_ETCD_URL                   etcd's client URL (its JSON gateway serves /v3/kv/compaction)
//	KCTL_TEST_CONTROL_URL                POST /restart-apiserver restarts kube-apiserver on the same port
//
// There is no controller-manager: namespaces are never finalized and nothing is
// garbage-collected, so give every test a fresh namespace and never wait for a cascade.
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
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const usage = `usage: go run ./hack/controlplane COMMAND
  build                                   build etcd, kube-apiserver and kubectl into .cache/bin
  run [-kubeconfig-out FILE] -- CMD ARGS  start a control plane, run CMD against it, stop it
  start -dir DIR                          start a control plane in the background in DIR (must be new or empty)
  stop -dir DIR                           stop the control plane started in DIR and remove DIR`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	var code int
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "build":
		if _, err := ensureBuilt(context.Background()); err != nil {
			code = fail(err)
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

// binaries are the commands built from hack/tools, by file name and package.
var binaries = [][2]string{
	{"etcd", "./etcd"},
	{"kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"},
	{"kubectl", "k8s.io/kubernetes/cmd/kubectl"},
}

// ensureBuilt builds the binaries that are missing or older than hack/tools'
// go.mod or go.sum into .cache/bin, and returns that folder. A lock file keeps
// two concurrent runs from building at once. $KCTL_CONTROLPLANE_BIN, when set,
// names a folder of binaries to use instead, built nothing.
func ensureBuilt(ctx context.Context) (string, error) {
	if bin := os.Getenv("KCTL_CONTROLPLANE_BIN"); bin != "" {
		return filepath.Abs(bin)
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	tools, bin := filepath.Join(root, "hack", "tools"), filepath.Join(root, ".cache", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	lock, err := os.Create(filepath.Join(bin, ".lock"))
	if err != nil {
		return "", err
	}
	defer lock.Close() // closing releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fmt.Fprintln(os.Stderr, "controlplane: waiting for another build of the control plane to finish")
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			return "", err
		}
	}
	var newest time.Time
	for _, f := range []string{"go.mod", "go.sum"} {
		if st, err := os.Stat(filepath.Join(tools, f)); err == nil && st.ModTime().After(newest) {
			newest = st.ModTime()
		}
	}
	var stale []string
	for _, b := range binaries {
		if st, err := os.Stat(filepath.Join(bin, b[0])); err != nil || !st.ModTime().After(newest) {
			stale = append(stale, b[1])
		}
	}
	if len(stale) == 0 {
		return bin, nil
	}
	return bin, goBuild(ctx, tools, bin, stale)
}

// goBuild runs go build in the tools module, with go's own output and a
// progress line every 20 s: a build from nothing takes minutes.
func goBuild(ctx context.Context, tools, bin string, pkgs []string) error {
	gomod, err := os.ReadFile(filepath.Join(tools, "go.mod"))
	if err != nil {
		return err
	}
	// Stamp the Kubernetes version in, as the release build does, so /version and kubectl tell it.
	v := regexp.MustCompile(`k8s\.io/kubernetes v((\d+)\.(\d+)\.\S+)`).FindStringSubmatch(string(gomod))
	if v == nil {
		return fmt.Errorf("no k8s.io/kubernetes requirement in %s/go.mod", tools)
	}
	x := "-X k8s.io/component-base/version."
	ldflags := fmt.Sprintf("%sgitVersion=v%s %sgitMajor=%s %sgitMinor=%s", x, v[1], x, v[2], x, v[3])
	fmt.Fprintf(os.Stderr, "controlplane: building %s into %s (from nothing: 5-7 minutes on 2 cores)\n",
		strings.Join(pkgs, " "), bin)
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-buildvcs=false", "-ldflags", ldflags, "-o", bin + "/"}, pkgs...)...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = tools, append(os.Environ(), "GOWORK=off"), os.Stderr, os.Stderr
	start, done := time.Now(), make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Second):
				fmt.Fprintf(os.Stderr, "controlplane: still building (%.0f s)\n", time.Since(start).Seconds())
			}
		}
	}()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the control plane failed: go build in %s: %w", tools, err)
	}
	fmt.Fprintf(os.Stderr, "controlplane: built in %.0f s\n", time.Since(start).Seconds())
	return nil
}

// repoRoot is the first folder upwards from the working directory that holds hack/tools/go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "hack", "tools", "go.mod")); err == nil {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("no hack/tools/go.mod in %s or above: run this in a kctl checkout, or set "+
				"KCTL_CONTROLPLANE_BIN to a checkout's .cache/bin after `make controlplane` there", dir)
		}
	}
}

// runCommand starts a control plane in a temporary folder, runs the command
// after "--" against it, stops the control plane, and returns the command's
// exit code. SIGINT and SIGTERM are passed on to the command; the control
// plane is stopped once it exits. If this process is killed, the kernel kills
// etcd and kube-apiserver (Pdeathsig).
func runCommand(args []string) int {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	kubeconfigOut := fs.String("kubeconfig-out", "", "also write the admin kubeconfig to this file (left behind)")
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

	bin, err := ensureBuilt(ctx)
	if err != nil {
		return fail(err)
	}
	removeStale()
	dir, err := os.MkdirTemp("", "kctl-controlplane-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	c := &cluster{dir: dir, bin: bin}
	defer c.down()
	err = os.WriteFile(filepath.Join(dir, "runner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
	if err == nil {
		err = c.up(ctx)
	}
	if err == nil && *kubeconfigOut != "" {
		err = c.writeKubeconfig(*kubeconfigOut, "kctl-admin", c.adminToken)
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
		if err := c.restartAPIServer(r.Context()); err != nil {
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
	cmd.Env = append(os.Environ(), c.env()...)
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

// removeStale removes the temporary folders of runs whose runner was killed
// with SIGKILL, which leaves them behind (the kernel kills etcd and kube-apiserver).
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "kctl-controlplane-*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "runner.pid"))
		if pid, _ := strconv.Atoi(string(b)); err == nil && !alive(pid) {
			os.RemoveAll(d)
		}
	}
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
	bin, err := ensureBuilt(context.Background())
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	ctx, stopNotify := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stopNotify()
	c := &cluster{dir: abs, bin: bin, detach: true}
	if err := c.up(ctx); err != nil {
		c.down()
		os.RemoveAll(abs)
		return err
	}
	pids := fmt.Sprintf("%d\n%d\n", c.api.cmd.Process.Pid, c.etcd.cmd.Process.Pid) // stop order
	env := ""
	for _, kv := range c.env() {
		env += "export " + kv + "\n"
	}
	if err := errors.Join(os.WriteFile(filepath.Join(abs, "pids"), []byte(pids), 0o644),
		os.WriteFile(filepath.Join(abs, "env"), []byte(env), 0o644)); err != nil {
		return err
	}
	fmt.Printf("control plane running; use it with:\n  export KUBECONFIG=%s\n  . %s/env  # for kctl's tests\n"+
		"stop it with:\n  go run ./hack/controlplane stop -dir %s\n", c.kubeconfig(), abs, *dir)
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
			stopPID(pid, func() bool { return !alive(pid) }, 5*time.Second)
		}
	}
	return os.RemoveAll(abs)
}
