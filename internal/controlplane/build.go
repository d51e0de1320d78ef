package controlplane

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// tools is the module that builds the binaries (see tools/go.mod.txt).
//
//go:embed tools/go.mod.txt tools/go.sum.txt tools/tools.go.txt tools/etcd.go.txt
var tools embed.FS

// toolsFiles maps each embedded file to its name in the build folder.
var toolsFiles = map[string]string{
	"tools/go.mod.txt":   "go.mod",
	"tools/go.sum.txt":   "go.sum",
	"tools/tools.go.txt": "tools.go",
	"tools/etcd.go.txt":  "etcd/main.go",
}

// binaries are the commands the tools module builds, by file name and package.
var binaries = [][2]string{
	{"etcd", "./etcd"},
	{"kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"},
	{"kubectl", "k8s.io/kubernetes/cmd/kubectl"},
}

// BinEnv names the variable that, when set, is a folder holding etcd,
// kube-apiserver and kubectl to use instead of building them.
const BinEnv = "KCTL_CONTROLPLANE_BIN"

// Versions returns the Kubernetes and etcd versions the tools module pins,
// e.g. "v1.36.3" and "v3.6.8".
func Versions() (kubernetes, etcd string) {
	gomod, _ := tools.ReadFile("tools/go.mod.txt") // embedded: cannot fail
	kubernetes = requirement(gomod, `k8s\.io/kubernetes`)
	etcd = requirement(gomod, `go\.etcd\.io/etcd/server/v3`)
	return kubernetes, etcd
}

func requirement(gomod []byte, module string) string {
	m := regexp.MustCompile(`\n\s*` + module + ` (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		return "unknown"
	}
	return string(m[1])
}

// Binaries returns the folder holding etcd, kube-apiserver and kubectl:
// $KCTL_CONTROLPLANE_BIN when set, else a folder of the per-user cache
// (os.UserCacheDir()/kctl/kube-VERSION-etcd-VERSION-OS-ARCH-HASH), where they
// are built on first use with `go build` and the Go module proxy. One build
// runs at a time per folder, across processes (a file lock): a second caller
// waits for it and uses its result. progress gets one line every 10 s while
// building or waiting.
func Binaries(ctx context.Context, progress io.Writer) (string, error) {
	if bin := os.Getenv(BinEnv); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			return "", err
		}
		if missing := missingBinaries(abs); len(missing) > 0 {
			return "", fmt.Errorf("%s=%s lacks %s: point it at a folder holding etcd, kube-apiserver and kubectl, or unset it to build them",
				BinEnv, bin, strings.Join(missing, ", "))
		}
		return abs, nil
	}
	dir, err := cacheFolder()
	if err != nil {
		return "", err
	}
	if len(missingBinaries(dir)) == 0 {
		return dir, nil // built before: no lock needed, the folder appears whole (rename)
	}
	return dir, buildLocked(ctx, dir, progress)
}

// cacheFolder is where Binaries keeps the binaries of this tools module.
func cacheFolder() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no per-user cache folder to build the control plane into (%w): set %s to a folder holding etcd, kube-apiserver and kubectl", err, BinEnv)
	}
	h := sha256.New()
	for _, name := range []string{"tools/go.mod.txt", "tools/go.sum.txt", "tools/tools.go.txt", "tools/etcd.go.txt"} {
		b, _ := tools.ReadFile(name)
		h.Write(b)
	}
	k8s, etcd := Versions()
	name := fmt.Sprintf("kube-%s-etcd-%s-%s-%s-%s", k8s, etcd, runtime.GOOS, runtime.GOARCH, hex.EncodeToString(h.Sum(nil))[:8])
	return filepath.Join(cache, "kctl", name), nil
}

func missingBinaries(dir string) []string {
	var missing []string
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(dir, b[0])); err != nil {
			missing = append(missing, b[0])
		}
	}
	return missing
}

// ControllerManagerBinary is kube-controller-manager's file name. Binaries
// does not build it: ControllerManager does, when a test asks for garbage
// collection or namespace deletion.
const ControllerManagerBinary = "kube-controller-manager"

// ControllerManager returns the path of kube-controller-manager, of the
// version of Binaries' kube-apiserver, in Binaries' folder: built there on
// first use (after Binaries' own build, if that is needed too), one build at
// a time across processes, as Binaries does. With $KCTL_CONTROLPLANE_BIN set,
// that folder must hold it.
func ControllerManager(ctx context.Context, progress io.Writer) (string, error) {
	dir, err := Binaries(ctx, progress)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, ControllerManagerBinary)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if bin := os.Getenv(BinEnv); bin != "" {
		k8s, _ := Versions()
		return "", fmt.Errorf("%s=%s lacks %s %s, which a test that asks for garbage collection or namespace deletion runs: "+
			"unset %s to build it into the per-user cache, or copy it from the folder that "+
			"`go run github.com/kctl-dev/kctl/hack/controlplane build -controller-manager` prints",
			BinEnv, bin, ControllerManagerBinary, k8s, BinEnv)
	}
	built := func() bool {
		_, err := os.Stat(path)
		return err == nil
	}
	what := "kube-controller-manager"
	err = locked(ctx, dir+".controller-manager", what, progress, built, func() error {
		return buildInto(ctx, dir, dir, what, progress, expectedControllerManagerBuildTime(), "k8s.io/kubernetes/cmd/kube-controller-manager")
	})
	if err != nil {
		return "", err
	}
	return path, nil
}

// buildLocked takes dir's build lock, and builds into dir unless the holder
// before it did.
func buildLocked(ctx context.Context, dir string, progress io.Writer) error {
	built := func() bool { return len(missingBinaries(dir)) == 0 }
	return locked(ctx, dir, "the control plane", progress, built, func() error {
		return build(ctx, dir, progress)
	})
}

// locked runs build holding the file lock name+".lock", unless built turns
// true first: a second caller waits for the first one's build and uses it.
// Temporary folders name+".building-*" that a killed build left are removed.
func locked(ctx context.Context, name, what string, progress io.Writer, built func() bool, build func() error) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(name+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close() // closing releases the lock, also when the process dies
	err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		stop := every(progress, 10*time.Second, func(d time.Duration) string {
			return fmt.Sprintf("waiting %.0f s for another process's build of %s into %s", d.Seconds(), what, filepath.Dir(name))
		})
		err = flockContext(ctx, lock)
		stop()
	}
	if err != nil {
		return err
	}
	if built() {
		return nil // the process that held the lock built it
	}
	// Holding the lock, no build is under way: these are left by one that was killed.
	stale, _ := filepath.Glob(name + ".building-*")
	for _, d := range stale {
		os.RemoveAll(d)
	}
	return build()
}

// flockContext waits for an exclusive lock on f until ctx ends.
func flockContext(ctx context.Context, f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for another build: %w", context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// build builds the binaries into a folder next to dir, and renames that to
// dir, so dir never holds half a build.
func build(ctx context.Context, dir string, progress io.Writer) error {
	out, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".building-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(out) // gone once renamed
	k8s, etcd := Versions()
	what := fmt.Sprintf("the control plane (kube-apiserver %s, etcd %s, kubectl)", k8s, etcd)
	var pkgs []string
	for _, b := range binaries {
		pkgs = append(pkgs, b[1])
	}
	if err := buildInto(ctx, out, dir, what, progress, expectedBuildTime(), pkgs...); err != nil {
		return err
	}
	return os.Rename(out, dir)
}

// buildInto writes the tools module to a temporary folder and builds pkgs
// from it into the folder into: each binary is written to a temporary file
// there and renamed, so into never holds half a binary. It writes a line to
// progress first (naming dest, where the binaries end up), one every 10 s,
// and one at the end.
func buildInto(ctx context.Context, into, dest, what string, progress io.Writer, expected time.Duration, pkgs ...string) error {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	src, err := os.MkdirTemp("", "kctl-controlplane-tools-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	for from, to := range toolsFiles {
		b, _ := tools.ReadFile(from)
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, to)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(src, to), b, 0o644); err != nil {
			return err
		}
	}
	out, err := os.MkdirTemp(into, ".building-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(out)
	k8s, _ := Versions()
	// Stamp the Kubernetes version in, as the release build does, so /version and kubectl tell it.
	major, minor, _ := strings.Cut(strings.TrimPrefix(k8s, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	x := "-X k8s.io/component-base/version."
	ldflags := fmt.Sprintf("%sgitVersion=%s %sgitMajor=%s %sgitMinor=%s", x, k8s, x, major, x, minor)
	args := []string{"build", "-buildvcs=false", "-ldflags", ldflags, "-o", out + string(filepath.Separator)}
	args = append(args, pkgs...)
	cmd := exec.CommandContext(ctx, goCmd, args...)
	var output bytes.Buffer
	// GOFLAGS: the user's (e.g. -mod=vendor) are for their module, not this one.
	cmd.Dir = src
	cmd.Stdout = &output
	cmd.Stderr = &output
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	start := time.Now()
	fmt.Fprintf(progress, "kctl: building %s into %s; first use only. %s\n", what, dest, buildTimeSays(expected))
	stop := every(progress, 10*time.Second, func(d time.Duration) string {
		return fmt.Sprintf("still building %s: %.0f s of about %.0f min on idle cores", what, d.Seconds(), expected.Minutes())
	})
	err = cmd.Run()
	stop()
	if err != nil {
		return fmt.Errorf("building %s failed: go %s in %s: %w\n%s", what, strings.Join(args, " "), src, err, lastLines(output.String(), 30))
	}
	for _, pkg := range pkgs {
		name := filepath.Base(pkg)
		if err := os.Rename(filepath.Join(out, name), filepath.Join(into, name)); err != nil {
			return err
		}
	}
	fmt.Fprintf(progress, "kctl: built %s in %.0f s\n", what, time.Since(start).Seconds())
	return nil
}

// expectedBuildTime is what a build from an empty Go build cache takes on
// idle cores: about 12 CPU-minutes of compiling (measured: 6 minutes on 2
// idle cores; 10.8 minutes on 2 cores shared with other work).
func expectedBuildTime() time.Duration {
	return max(2*time.Minute, 12*time.Minute/time.Duration(runtime.NumCPU()))
}

// expectedControllerManagerBuildTime is what kube-controller-manager's build
// takes on idle cores once the control plane's is done: about 3 CPU-minutes
// more (the controllers, the volume plugins, parts of the kubelet).
func expectedControllerManagerBuildTime() time.Duration {
	return max(time.Minute, 3*time.Minute/time.Duration(runtime.NumCPU()))
}

// buildTimeSays is what a build expected to take that long on idle cores
// depends on, for its first line.
func buildTimeSays(expected time.Duration) string {
	return fmt.Sprintf("It is about %.0f CPU-minutes of compiling: about %.0f min on %d idle cores with an empty Go build cache; "+
		"longer while other work shares the cores (10.8 min was seen for the control plane on 2 busy cores), "+
		"plus the download of the modules if the Go module cache lacks them; under a minute with a warm Go build cache.",
		expected.Minutes()*float64(runtime.NumCPU()), expected.Minutes(), runtime.NumCPU())
}

// every writes "kctl: " + line(elapsed) to w every period until stop is called.
func every(w io.Writer, period time.Duration, line func(elapsed time.Duration) string) (stop func()) {
	start := time.Now()
	done := make(chan struct{})
	ticker := time.NewTicker(period)
	go func() {
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case <-ticker.C:
				fmt.Fprintln(w, "kctl: "+line(time.Since(start)))
			}
		}
	}()
	return func() { close(done) }
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
