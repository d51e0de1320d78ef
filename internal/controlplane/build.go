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

// buildLocked takes dir's build lock, and builds into dir unless the holder
// before it did.
func buildLocked(ctx context.Context, dir string, progress io.Writer) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close() // closing releases the lock, also when the process dies
	err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		stop := every(progress, 10*time.Second, func(d time.Duration) string {
			return fmt.Sprintf("waiting %.0f s for another process's build of the control plane into %s", d.Seconds(), dir)
		})
		err = flockContext(ctx, lock)
		stop()
	}
	if err != nil {
		return err
	}
	if len(missingBinaries(dir)) == 0 {
		return nil // the process that held the lock built them
	}
	// Holding the lock, no build is under way: these are left by one that was killed.
	stale, _ := filepath.Glob(dir + ".building-*")
	for _, d := range stale {
		os.RemoveAll(d)
	}
	return build(ctx, dir, progress)
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
			return fmt.Errorf("waiting for another build of the control plane: %w", context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// build writes the tools module to a temporary folder, builds the binaries
// into another one next to dir, and renames that to dir, so dir never holds
// half a build.
func build(ctx context.Context, dir string, progress io.Writer) error {
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
	out, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".building-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(out) // gone once renamed
	k8s, etcd := Versions()
	// Stamp the Kubernetes version in, as the release build does, so /version and kubectl tell it.
	major, minor, _ := strings.Cut(strings.TrimPrefix(k8s, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	x := "-X k8s.io/component-base/version."
	ldflags := fmt.Sprintf("%sgitVersion=%s %sgitMajor=%s %sgitMinor=%s", x, k8s, x, major, x, minor)
	args := []string{"build", "-buildvcs=false", "-ldflags", ldflags, "-o", out + string(filepath.Separator)}
	for _, b := range binaries {
		args = append(args, b[1])
	}
	cmd := exec.CommandContext(ctx, goCmd, args...)
	var output bytes.Buffer
	// GOFLAGS: the user's (e.g. -mod=vendor) are for their module, not this one.
	cmd.Dir = src
	cmd.Stdout = &output
	cmd.Stderr = &output
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	expected := expectedBuildTime()
	start := time.Now()
	fmt.Fprintf(progress, "kctl: building the control plane (kube-apiserver %s, etcd %s, kubectl) into %s; "+
		"first use only. %s\n", k8s, etcd, dir, buildTimeSays())
	stop := every(progress, 10*time.Second, func(d time.Duration) string {
		return fmt.Sprintf("still building the control plane: %.0f s of about %.0f min on idle cores", d.Seconds(), expected.Minutes())
	})
	err = cmd.Run()
	stop()
	if err != nil {
		return fmt.Errorf("building the control plane failed: go %s in %s: %w\n%s", strings.Join(args, " "), src, err, lastLines(output.String(), 30))
	}
	if err := os.Rename(out, dir); err != nil {
		return err
	}
	fmt.Fprintf(progress, "kctl: built the control plane in %.0f s\n", time.Since(start).Seconds())
	return nil
}

// expectedBuildTime is what a build from an empty Go build cache takes on
// idle cores: about 12 CPU-minutes of compiling (measured: 6 minutes on 2
// idle cores; 10.8 minutes on 2 cores shared with other work).
func expectedBuildTime() time.Duration {
	return max(2*time.Minute, 12*time.Minute/time.Duration(runtime.NumCPU()))
}

// buildTimeSays is what the build's time depends on, for its first line.
func buildTimeSays() string {
	return fmt.Sprintf("It is about 12 CPU-minutes of compiling: about %.0f min on %d idle cores with an empty Go build cache; "+
		"longer while other work shares the cores (10.8 min was seen on 2 busy cores), "+
		"plus the download of the modules if the Go module cache lacks them; under a minute with a warm Go build cache.",
		expectedBuildTime().Minutes(), runtime.NumCPU())
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
