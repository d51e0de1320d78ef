package controlplane

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(RunTests(m)) }

// helperEnv makes the test binary, run again by a test, a helper process:
// TestHelper starts the control plane, prints its URL, then does what the
// variable says.
const helperEnv = "KCTL_CONTROLPLANE_HELPER"

func TestHelper(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("runs only as a helper process")
	}
	c := Require(t)
	fmt.Printf("pids: %d %d\n", c.PIDs()[0], c.PIDs()[1])
	fmt.Printf("api-url: %s\n", c.APIURL)
	os.Stdout.Sync()
	switch mode {
	case "return": // RunTests stops the control plane
	case "fatal":
		t.Fatal("helper fails")
	case "panic":
		panic("helper panics")
	case "exit":
		os.Exit(3) // as log.Fatal in a test or TestMain: no deferred call, no RunTests
	case "wait":
		select {} // until a signal
	}
}

// helper starts this test binary as a helper process in mode, with env
// added to its environment, and returns it with its combined output.
func helper(t *testing.T, mode string, env ...string) (*exec.Cmd, *output) {
	t.Helper()
	return helperWith(t, mode, nil, env...)
}

// helperWith is helper with more arguments for the test binary, in a
// process group of its own.
func helperWith(t *testing.T, mode string, args []string, env ...string) (*exec.Cmd, *output) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestHelper$", "-test.v"}, args...)...)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &output{}
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

// output is a helper's output, written by the goroutine of exec.Cmd.
type output struct {
	mu sync.Mutex
	b  strings.Builder
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// printedURL returns the URL the helper printed, if it did.
func printedURL(out *output) (string, bool) {
	for line := range strings.Lines(out.String()) {
		if u, ok := strings.CutPrefix(line, "api-url: "); ok {
			return strings.TrimSpace(u), true
		}
	}
	return "", false
}

// apiURL returns the URL the running helper prints, waiting up to 2 minutes for it.
func apiURL(t *testing.T, out *output) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if u, ok := printedURL(out); ok {
			return u
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the helper printed no URL in 2 minutes:\n%s", out)
	return ""
}

// wantClosed waits up to 15 s until nothing listens at url's host:port.
func wantClosed(t *testing.T, url string) {
	t.Helper()
	host := strings.TrimPrefix(url, "https://")
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", host, time.Second)
		if err != nil {
			return
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepts connections 15 s after its test binary ended", host)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Two test binaries started at once with an empty cache: one builds (here a
// stand-in for go build that copies the real binaries and counts its runs),
// the other waits for it, and each runs a kube-apiserver of its own.
func TestBinaries_TwoTestBinariesAtOnce_ShareOneBuildAndEachGetsItsOwnServer(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("tells that a helper waits on the build lock through /proc")
	}
	real := Require(t).Bin
	tmp := t.TempDir()
	fakeGo := filepath.Join(tmp, "bin", "go")
	count := filepath.Join(tmp, "builds")
	release := filepath.Join(tmp, "release")
	// The build holds the lock until the test releases it: the test does so
	// only once the other helper is seen waiting for that lock.
	script := `#!/bin/sh
# A stand-in for go build: counts its runs, waits for the test's release
# (at most 5 minutes), copies the real binaries to -o.
echo "$PWD" >>"` + count + `"
test -f go.mod && test -f go.sum && test -f tools.go && test -f etcd/main.go || { echo "no tools module in $PWD" >&2; exit 1; }
i=0
until test -f "` + release + `"; do
	i=$((i+1)); test $i -gt 3000 && { echo "the test never released the build" >&2; exit 1; }
	sleep 0.1
done
while [ $# -gt 0 ]; do if [ "$1" = -o ]; then out=$2; fi; shift; done
cp "` + real + `/etcd" "` + real + `/kube-apiserver" "` + real + `/kubectl" "$out"
`
	if err := os.MkdirAll(filepath.Dir(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fakeGo, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(tmp, "cache")
	env := []string{"XDG_CACHE_HOME=" + cache, BinEnv + "=",
		"PATH=" + filepath.Dir(fakeGo) + string(os.PathListSeparator) + os.Getenv("PATH")}
	a, aOut := helper(t, "return", env...)
	b, bOut := helper(t, "return", env...)
	// Both helpers have the build lock open while one build runs: the
	// builder holds it, so the other is waiting for it.
	deadline := time.Now().Add(2 * time.Minute)
	for !(buildsStarted(count) == 1 && holdsLockFile(a.Process.Pid, cache) && holdsLockFile(b.Process.Pid, cache)) {
		if buildsStarted(count) > 1 || time.Now().After(deadline) {
			os.WriteFile(release, nil, 0o644)
			t.Fatalf("want one build, with both helpers at its lock within 2 min; builds started: %d:\n--- a:\n%s\n--- b:\n%s",
				buildsStarted(count), aOut, bOut)
		}
		time.Sleep(20 * time.Millisecond) // polling /proc, with the deadline above
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	errA := a.Wait()
	errB := b.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("helpers: %v, %v\n--- a:\n%s\n--- b:\n%s", errA, errB, aOut, bOut)
	}
	urlA, okA := printedURL(aOut)
	urlB, okB := printedURL(bOut)
	if !okA || !okB {
		t.Fatalf("a helper did not start a control plane:\n--- a:\n%s\n--- b:\n%s", aOut, bOut)
	}
	if urlA == urlB {
		t.Errorf("both test binaries used the kube-apiserver at %s, want one each", urlA)
	}
	if n := buildsStarted(count); n != 1 {
		t.Errorf("go build ran %d times, want once\n--- a:\n%s\n--- b:\n%s", n, aOut, bOut)
	}
	wantClosed(t, urlA)
	wantClosed(t, urlB)
}

// buildsStarted is how many times the stand-in go build has started.
func buildsStarted(count string) int {
	b, _ := os.ReadFile(count)
	return strings.Count(string(b), "\n")
}

// holdsLockFile reports whether process pid has a build lock file under
// cache open (buildLocked opens it before it takes or waits for the lock).
func holdsLockFile(pid int, cache string) bool {
	fds := fmt.Sprintf("/proc/%d/fd", pid)
	entries, _ := os.ReadDir(fds)
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(fds, e.Name()))
		if err == nil && strings.HasPrefix(target, cache) && strings.HasSuffix(target, ".lock") {
			return true
		}
	}
	return false
}

// However the test binary ends, etcd and kube-apiserver end with it, and
// its folder of etcd data and private keys goes too (its reaper removes it):
// each helper has a TMPDIR of its own, which must be empty at the end.
// "Ctrl-C" is a SIGINT to the helper's process group, as a terminal sends it
// to go test and the test binary; "timeout" is go test -timeout.
func TestShared_ProcessesDieWithTheTestBinary(t *testing.T) {
	Require(t)
	ends := []string{"return", "fatal", "panic", "exit", "timeout", "SIGINT", "SIGTERM", "SIGKILL", "Ctrl-C", "Ctrl-C to go test"}
	for _, end := range ends {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			mode := end
			var args []string
			switch {
			case end == "timeout":
				mode = "wait"
				args = []string{"-test.timeout=45s"}
			case strings.HasPrefix(end, "SIG") || strings.HasPrefix(end, "Ctrl-C"):
				mode = "wait"
			}
			var cmd *exec.Cmd
			var out *output
			if end == "Ctrl-C to go test" {
				cmd, out = goTestHelper(t, mode, "TMPDIR="+tmp, "GOTMPDIR="+t.TempDir())
			} else {
				cmd, out = helperWith(t, mode, args, "TMPDIR="+tmp)
			}
			if end != "timeout" { // it may time out before it prints one
				apiURL(t, out)
			}
			switch end {
			case "SIGINT":
				cmd.Process.Signal(syscall.SIGINT)
			case "SIGTERM":
				cmd.Process.Signal(syscall.SIGTERM)
			case "SIGKILL":
				cmd.Process.Kill()
			case "Ctrl-C", "Ctrl-C to go test":
				syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
			}
			err := cmd.Wait()
			if end == "return" && err != nil {
				t.Errorf("helper: %v\n%s", err, out)
			}
			if url, ok := printedURL(out); ok {
				wantClosed(t, url)
			}
			for _, pid := range printedPIDs(out) {
				wantDead(t, pid)
			}
			wantEmpty(t, tmp, out)
		})
	}
}

// goTestHelper runs TestHelper through go test, as a terminal would: go
// test and the test binary it builds are in one process group of their own.
func goTestHelper(t *testing.T, mode string, env ...string) (*exec.Cmd, *output) {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goCmd, "test", "-count=1", "-v", "-run=^TestHelper$", ".")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &output{}
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

// printedPIDs returns the PIDs the helper printed, if it did.
func printedPIDs(out *output) []int {
	var pids []int
	for line := range strings.Lines(out.String()) {
		if rest, ok := strings.CutPrefix(line, "pids: "); ok {
			for _, f := range strings.Fields(rest) {
				pid, _ := strconv.Atoi(f)
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// wantDead waits up to 15 s until pid no longer runs.
func wantDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs 15 s after its test binary ended", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// wantEmpty waits up to 15 s until the folder dir holds nothing.
func wantEmpty(t *testing.T, dir string, out *output) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still holds %s 15 s after its test binary ended\n%s", dir, entries[0].Name(), out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Without a control plane, a test fails with the reason when CI=true, and is
// skipped otherwise.
func TestRequire_NoControlPlane_FailsInCIAndSkipsElsewhere(t *testing.T) {
	missing := BinEnv + "=" + t.TempDir() // holds no binaries
	for _, c := range []struct {
		ci       string
		wantFail bool
		want     string
	}{
		{"true", true, "--- FAIL: TestHelper"},
		{"", false, "--- SKIP: TestHelper"},
	} {
		cmd, out := helper(t, "return", missing, "CI="+c.ci)
		err := cmd.Wait()
		if (err != nil) != c.wantFail {
			t.Errorf("CI=%q: the helper's exit = %v, want failure %t\n%s", c.ci, err, c.wantFail, out)
		}
		reason := "cannot start the local control plane: " + BinEnv + "=" // names what is wrong
		if !strings.Contains(out.String(), c.want) || !strings.Contains(out.String(), reason) {
			t.Errorf("CI=%q: the helper's output lacks %q or %q:\n%s", c.ci, c.want, reason, out)
		}
	}
}

func TestBuildFits_TooLittleTimeBeforeTheTestTimeout_NamesTheCommandThatBuildsAhead(t *testing.T) {
	t.Setenv(BinEnv, "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // an empty per-user cache: the binaries must be built
	err := buildFits(time.Now().Add(2*time.Minute), false)
	if err == nil || !strings.Contains(err.Error(), "go run github.com/kctl-dev/kctl/hack/controlplane build\n") {
		t.Errorf("buildFits(2 min left) = %v, want an error naming the build command", err)
	}
	err = buildFits(time.Now().Add(2*time.Minute), true)
	if err == nil || !strings.Contains(err.Error(), "hack/controlplane build -controller-manager\n") {
		t.Errorf("buildFits(2 min left, with kube-controller-manager) = %v, want an error naming the command that builds it too", err)
	}
	if err := buildFits(time.Now().Add(time.Hour), true); err != nil {
		t.Errorf("buildFits(1 h left) = %v, want nil: the build fits", err)
	}
	if err := buildFits(time.Time{}, true); err != nil {
		t.Errorf("buildFits(no deadline) = %v, want nil", err)
	}
}

// The first build's announcement says what its time depends on: the cores
// and whether they are idle, and the Go build cache.
func TestBuildTimeSays_NamesWhatTheTimeDependsOn(t *testing.T) {
	says := buildTimeSays(expectedBuildTime())
	for _, want := range []string{"CPU-minutes", "idle cores", "busy", "empty Go build cache", "warm Go build cache", "download"} {
		if !strings.Contains(says, want) {
			t.Errorf("buildTimeSays() = %q, lacks %q", says, want)
		}
	}
}

// With KCTL_CONTROLPLANE_BIN naming a folder without kube-controller-manager,
// a test that asks for it gets an error naming what is missing and the
// command that builds it, and nothing is built.
func TestControllerManager_BinFolderWithoutIt_SaysWhatToAdd(t *testing.T) {
	dir := t.TempDir()
	for _, b := range binaries {
		if err := os.WriteFile(filepath.Join(dir, b[0]), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(BinEnv, dir)
	path, err := ControllerManager(t.Context(), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "lacks kube-controller-manager") ||
		!strings.Contains(err.Error(), "hack/controlplane build -controller-manager") {
		t.Errorf("ControllerManager with %s lacking it = %q, %v; want an error naming it and its build", BinEnv, path, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ControllerManagerBinary)); err == nil {
		t.Errorf("ControllerManager built into %s=%s", BinEnv, dir)
	}
}
