package kbflags

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// ParseDeploymentArgs parses into fs the args of the first container of
// the first Deployment or StatefulSet in the manifest file at path, for a test that
// checks a program's manifest against its flags:
//
//	fs := flag.NewFlagSet("podcount", flag.ContinueOnError)
//	f := newFlags(fs)
//	err := kbflags.ParseDeploymentArgs(fs, "deployment.yaml")
//
// An error names the file and the args.
func ParseDeploymentArgs(fs *flag.FlagSet, path string) error {
	args, err := deploymentArgs(path)
	if err == nil {
		err = fs.Parse(args)
	}
	if err != nil {
		return fmt.Errorf("%s: args %q: %w", path, args, err)
	}
	return nil
}

// deploymentArgs returns the args ParseDeploymentArgs parses.
func deploymentArgs(path string) ([]string, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(file, 4096)
	for {
		var doc struct {
			Kind string `json:"kind"`
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Args []string `json:"args"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil, errors.New("no Deployment or StatefulSet with a container")
		}
		if err != nil {
			return nil, err
		}
		containers := doc.Spec.Template.Spec.Containers
		workload := doc.Kind == "Deployment" || doc.Kind == "StatefulSet"
		if workload && len(containers) > 0 {
			return containers[0].Args, nil
		}
	}
}
