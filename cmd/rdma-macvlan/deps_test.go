package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The daemon must never call the Docker API (from a driver callback that
// deadlocks dockerd at boot): it is not even linked with a Docker client.
func TestDaemonHasNoDockerClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"docker/docker/client", "moby/moby/client", "docker/cli/", "moby/moby/api"} {
			if strings.Contains(pkg, banned) {
				t.Errorf("the daemon links %s", pkg)
			}
		}
	}
	if !strings.Contains(string(out), "github.com/docker/go-plugins-helpers/sdk") {
		t.Fatal("dependency list looks wrong: go-plugins-helpers missing")
	}
}
