package main

import (
	"flag"
	"slices"
	"testing"
)

// TestAPIFlags_RepeatedFlagsKeepTheirOrder parses two -apiserver-flag
// values: both reach kube-apiserver's command line, in the order given.
func TestAPIFlags_RepeatedFlagsKeepTheirOrder(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var extra apiFlags
	fs.Var(&extra, "apiserver-flag", apiFlagHelp)
	err := fs.Parse([]string{"-apiserver-flag=--feature-gates=ShardedListAndWatch=true", "-apiserver-flag", "--v=2", "--", "true"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--feature-gates=ShardedListAndWatch=true", "--v=2"}
	if !slices.Equal(extra, want) || fs.Arg(0) != "true" {
		t.Errorf("apiserver flags = %q, command %q; want %q, command \"true\"", extra, fs.Args(), want)
	}
}

// TestAPIFlags_ValueWithoutDashesIsRefused: a value that is not a flag
// (a forgotten "--") is an error that shows the form to use.
func TestAPIFlags_ValueWithoutDashesIsRefused(t *testing.T) {
	var extra apiFlags
	err := extra.Set("feature-gates=ShardedListAndWatch=true")
	if err == nil || len(extra) != 0 {
		t.Fatalf("Set without dashes = %v, flags %q; want an error and no flag", err, extra)
	}
}
