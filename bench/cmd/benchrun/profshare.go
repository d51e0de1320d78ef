package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// historyFrames are the functions of kctl's per-key history on the
// reconcile and event paths: what the worker (the historyObserver's
// reconciled) and a dropped event (noteDrop, dropped) run, and what they
// call (entryOf, internal/history's books). The predicates' own walk
// (dropper) runs for every event, with or without history: not counted.
const historyFrames = `^github\.com/kctl-dev/kctl(\.(\(\*historyBooks\)\.|historyObserver\.|entryOf$|\(\*controller\[.*\]\)\.noteDrop$)|/internal/history\.)`

// profShare is `benchrun prof-share [-focus RE] [-sample-index I] BINARY
// PROFILE...`: for each profile, the samples in stacks with a frame
// matching RE (the focus's cumulative value, as `go tool pprof -focus`
// counts it) and the total, and then the share over every profile
// together. Profiles of kctl's podcount binary from e2e -cpuprofile-dir
// give the CPU share of the per-key history with the default focus.
func profShare(args []string) error {
	fs := flag.NewFlagSet("prof-share", flag.ExitOnError)
	focus := fs.String("focus", historyFrames, "regular expression a stack's frame must match")
	index := fs.String("sample-index", "", "sample index (e.g. alloc_space for an allocation profile); empty: the profile's default")
	fs.Parse(args)
	if fs.NArg() < 2 {
		return fmt.Errorf("usage: benchrun prof-share [-focus RE] [-sample-index I] BINARY PROFILE...")
	}
	re, err := regexp.Compile(*focus)
	if err != nil {
		return err
	}
	bin := fs.Arg(0)
	var in, all float64
	var shares []float64
	for _, prof := range fs.Args()[1:] {
		a, t, unit, err := shareOf(bin, prof, *index, re)
		if err != nil {
			return err
		}
		in, all = in+a, all+t
		shares = append(shares, 100*a/t)
		fmt.Printf("%s\t%.4g %s of %.4g %s\t%.3f %%\n", prof, a, unit, t, unit, 100*a/t)
	}
	s := summarize(shares)
	fmt.Printf("all %d profiles\t%.4g of %.4g\t%.3f %% (per profile: median %.3f %%, min %.3f %%, max %.3f %%)\n",
		len(shares), in, all, 100*in/all, s.median, s.min, s.max)
	return nil
}

// shareOf sums the samples of prof's stacks that have a frame matching re,
// and of all its stacks, from `go tool pprof -traces`, in one unit.
func shareOf(bin, prof, index string, re *regexp.Regexp) (in, all float64, unit string, err error) {
	args := []string{"tool", "pprof", "-traces"}
	if index != "" {
		args = append(args, "-sample_index="+index)
	}
	cmd := exec.Command("go", append(args, bin, prof)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, "", fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	// Headers come first; then each trace is a separator line, a line
	// with its value (right-aligned in the first 11 columns) and its first
	// frame, then one frame a line.
	var val float64
	var hit, inTrace bool
	flush := func() {
		all += val
		if hit {
			in += val
		}
		val, hit = 0, false
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "-----------+") {
			flush()
			inTrace = true
			continue
		}
		if !inTrace || len(l) < 11 {
			continue
		}
		if label.MatchString(l) {
			continue // a sample's label, such as "bytes:  128B" in a heap profile
		}
		if head := strings.TrimSpace(l[:11]); head != "" {
			v, u, ok := parseQuantity(head)
			if !ok {
				return 0, 0, "", fmt.Errorf("%s: cannot read the trace value %q", prof, head)
			}
			val, unit = v, u
		}
		frame := strings.TrimSuffix(strings.TrimSpace(l[11:]), " (inline)")
		if re.MatchString(frame) {
			hit = true
		}
	}
	flush()
	return in, all, unit, nil
}

// label matches a label line of `go tool pprof -traces`.
var label = regexp.MustCompile(`^\s*[a-zA-Z_]+:\s`)

// quantity matches a number with its unit, e.g. "1.50s" or "512kB".
var quantity = regexp.MustCompile(`^([0-9.]+)([a-zA-Z]*)$`)

// parseQuantity reads "10ms", "1.50s", "512kB", "3MB" or a plain number,
// in ms for times and bytes for sizes.
func parseQuantity(s string) (float64, string, bool) {
	m := quantity.FindStringSubmatch(s)
	if m == nil {
		return 0, "", false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, "", false
	}
	mult := map[string]float64{"": 1, "ns": 1e-6, "us": 1e-3, "ms": 1, "s": 1e3, "B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}
	k, ok := mult[m[2]]
	if !ok {
		return 0, "", false
	}
	unit := "ms"
	if strings.HasSuffix(m[2], "B") {
		unit = "B"
	} else if m[2] == "" {
		unit = "samples"
	}
	return v * k, unit, true
}
